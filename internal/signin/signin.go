// Package signin holds acpbridge's stored sign-in: the endpoint, the model
// and the key that `acpbridge setup` writes to one file only the user can
// read, the rule of which endpoints need a key, and the setup command
// itself (setup.go). The agent reads the file; flags and the environment
// take precedence over it (the root's auth.go).
//
// signin.go holds the file: where it lives, reading, writing, and
// removing the key.
package signin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// DefaultEndpoint is the endpoint when neither a flag, the environment nor
// the stored sign-in names one.
const DefaultEndpoint = "https://api.openai.com/v1"

// FileName is the stored sign-in's name in its folder.
const FileName = "signin.json"

// Stored is what a sign-in keeps. Any field may be empty: a sign-out
// removes the key and keeps the rest.
type Stored struct {
	Endpoint string `json:"endpoint,omitempty"`
	Model    string `json:"model,omitempty"`
	Key      string `json:"key,omitempty"`
}

// Path is where the sign-in is stored: $XDG_CONFIG_HOME/acpbridge (on
// every OS, when set), else the user's config folder on Windows
// (%AppData%), else ~/.config/acpbridge.
func Path() (string, error) {
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "acpbridge", FileName), nil
	}
	if runtime.GOOS == "windows" {
		d, err := os.UserConfigDir()
		if err != nil {
			return "", fmt.Errorf("cannot find the user's config folder to keep the sign-in in: %v", err)
		}
		return filepath.Join(d, "acpbridge", FileName), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("cannot find the home folder to keep the sign-in in (set XDG_CONFIG_HOME): %v", err)
	}
	return filepath.Join(home, ".config", "acpbridge", FileName), nil
}

// maxFile is the largest sign-in file read: what setup writes is a few
// hundred bytes, and a file grown past this is not one of its.
const maxFile = 64 << 10

// Load reads the sign-in at path; none stored is the zero Stored and no
// error.
func Load(path string) (Stored, error) {
	var s Stored
	if path == "" {
		return s, errors.New("there is no folder to keep a sign-in in: set XDG_CONFIG_HOME (or HOME)")
	}
	// Not opened before it is known to be a file: opening a FIFO would
	// wait for a writer, and hold every session/new with it.
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("it is not a regular file (%v)", fi.Mode().Type())
	}
	var f *os.File
	if err == nil {
		f, err = os.Open(path)
	}
	if err != nil {
		return s, fmt.Errorf("cannot read the stored sign-in %s: %v; remove it and run acpbridge setup again", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	switch {
	case err != nil:
		return s, fmt.Errorf("cannot read the stored sign-in %s: %v", path, err)
	case len(b) > maxFile:
		return s, fmt.Errorf("the stored sign-in %s is larger than acpbridge setup writes (over %d KiB): remove it and run acpbridge setup again", path, maxFile>>10)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return Stored{}, fmt.Errorf("the stored sign-in %s is not what acpbridge setup writes (%v): run acpbridge setup again", path, err)
	}
	return s, nil
}

// Save writes s to path, readable by the user only (0600, in a folder of
// 0700): written whole to a new file and moved into place, so that a
// reader finds the old sign-in or the new one, never half of one.
func Save(path string, s Stored) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cannot make the folder %s for the sign-in: %v", dir, err)
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".signin-*")
	if err != nil {
		return fmt.Errorf("cannot write the sign-in in %s: %v", dir, err)
	}
	tmp := f.Name()      // created 0600: readable by its owner only
	defer os.Remove(tmp) // gone once renamed; left only by a failure
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("cannot write the sign-in %s: %v (free some space or fix the folder's permissions, then run acpbridge setup again)", path, err)
	}
	return nil
}

// ForgetKey removes the stored key from path, keeping the endpoint and
// the model; whether there was one.
func ForgetKey(path string) (bool, error) {
	s, err := Load(path)
	if err != nil || s.Key == "" {
		return false, err
	}
	s.Key = ""
	if s == (Stored{}) {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("cannot remove the stored sign-in %s: %v", path, err)
		}
		return true, nil
	}
	return true, Save(path, s)
}

// Local reports whether the endpoint at baseURL is on this machine (a
// loopback address or localhost): Ollama, a local server, acpbridge's own
// served model. Such an endpoint is used without a key; any other needs
// one.
func Local(baseURL string) bool {
	u, err := url.Parse(baseURL)
	if err != nil {
		return false
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// SameEndpoint reports whether a and b name one endpoint (a trailing slash
// and the letter case of the scheme and host aside): a stored key is sent
// only to the endpoint it was stored for.
func SameEndpoint(a, b string) bool {
	ua, erra := url.Parse(strings.TrimSuffix(a, "/"))
	ub, errb := url.Parse(strings.TrimSuffix(b, "/"))
	if erra != nil || errb != nil {
		return false
	}
	return strings.EqualFold(ua.Scheme, ub.Scheme) && strings.EqualFold(ua.Host, ub.Host) && ua.Path == ub.Path
}
