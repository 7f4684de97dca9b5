// setup.go holds `acpbridge setup`, what the editor's terminal sign-in
// runs (and a user in a shell, or a script): it asks for the endpoint,
// the key (not echoed) and the model, checks the key against the
// endpoint's GET /models, and stores the three.

package signin

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"acpbridge/internal/cliflag"
	"acpbridge/internal/model"
)

// Options are what the agent's own command line gives setup: where the
// sign-in is stored, and the endpoint and model it names (--base-url or
// OPENAI_BASE_URL, --model openai:NAME or ACPBRIDGE_MODEL; "" when it
// names none), which setup offers first.
type Options struct {
	Path     string
	Endpoint string
	Model    string
	Getenv   func(string) string // os.Getenv, or a test's
}

// checkTimeout bounds the key's check against the endpoint.
const checkTimeout = 20 * time.Second

// maxInput bounds what setup reads of stdin in all.
const maxInput = 1 << 20

// shownModels is how many of the endpoint's models setup lists; any other
// can be typed by name.
const shownModels = 40

const setupUsage = `Usage: acpbridge setup [--base-url URL] [--model NAME] [--from-env]
       acpbridge setup --sign-out

Signs acpbridge in to an OpenAI-compatible endpoint (OpenAI's, Ollama's,
OpenRouter's, any other): asks for the endpoint, the key (not shown as it is
typed) and the model, checks the key against the endpoint, and stores the
three in one file only you can read. An editor's sign-in runs it in a
terminal. With stdin not a terminal, the key is stdin's first line; with
--from-env it is OPENAI_API_KEY. Flags and the environment of a running
acpbridge take precedence over what is stored.

Flags:
`

// Setup runs `acpbridge setup ARGS`: 0 once the sign-in is stored, 1 when
// the endpoint refuses the key or cannot be reached (nothing is stored),
// 2 for a usage error, 130 when interrupted.
func Setup(ctx context.Context, args []string, opt Options, stdin io.Reader, stdout, stderr io.Writer) int {
	if opt.Getenv == nil {
		opt.Getenv = os.Getenv
	}
	fs := flag.NewFlagSet("acpbridge setup", flag.ContinueOnError)
	endpoint := fs.String("base-url", opt.Endpoint, "`URL` of the OpenAI-compatible endpoint (default: the stored one, else "+DefaultEndpoint+")")
	name := fs.String("model", strings.TrimPrefix(opt.Model, "openai:"), "the model's `NAME` (default: asked, or the stored one)")
	fromEnv := fs.Bool("from-env", false, "take the key from OPENAI_API_KEY instead of asking")
	signOut := fs.Bool("sign-out", false, "remove the stored key and exit")
	if ok, status := cliflag.Parse(fs, args, "acpbridge setup", setupUsage, stdout, stderr); !ok {
		return status
	}
	if fs.NArg() > 0 {
		cliflag.Fail(stderr, "acpbridge setup", "unexpected argument %q", fs.Arg(0))
		return 2
	}
	if opt.Path == "" {
		fmt.Fprintln(stderr, "acpbridge setup: there is no folder to keep the sign-in in: set XDG_CONFIG_HOME (or HOME) and run it again")
		return 1
	}
	// What a user types, or a script sends, is a few short lines.
	u := &user{ctx: ctx, in: bufio.NewReader(io.LimitReader(stdin, maxInput)), out: stdout}
	if f, ok := stdin.(*os.File); ok && isTerminal(int(f.Fd())) {
		u.tty = f
	}
	s := &setup{opt: opt, u: u, stderr: stderr}
	if *signOut {
		return s.signOut()
	}
	return s.run(*endpoint, *name, *fromEnv)
}

// setup is one run of the command.
type setup struct {
	opt    Options
	u      *user
	stderr io.Writer
	stored Stored
}

func (s *setup) fail(format string, args ...any) int {
	fmt.Fprintf(s.stderr, "acpbridge setup: "+format+"\n", args...)
	return 1
}

func (s *setup) signOut() int {
	had, err := ForgetKey(s.opt.Path)
	switch {
	case err != nil:
		return s.fail("%v", err)
	case had:
		fmt.Fprintf(s.u.out, "Signed out: the key is removed from %s.\n", s.opt.Path)
	default:
		fmt.Fprintf(s.u.out, "No key is stored (%s).\n", s.opt.Path)
	}
	return 0
}

func (s *setup) run(endpoint, name string, fromEnv bool) int {
	var err error
	if s.stored, err = Load(s.opt.Path); err != nil {
		fmt.Fprintf(s.stderr, "acpbridge setup: %v; it will be replaced\n", err)
	}
	if s.u.tty != nil {
		fmt.Fprintln(s.u.out, "acpbridge setup: sign in to an OpenAI-compatible endpoint (Ctrl-C to stop; nothing is stored until the end).")
	}
	if endpoint, err = s.endpoint(endpoint); err != nil {
		return s.stopped(err)
	}
	key, err := s.key(endpoint, fromEnv)
	if err != nil {
		return s.stopped(err)
	}
	models, code := s.check(endpoint, key)
	if code != 0 {
		return code
	}
	if name, err = s.model(name, models); err != nil {
		return s.stopped(err)
	}
	if err := Save(s.opt.Path, Stored{Endpoint: endpoint, Model: name, Key: key}); err != nil {
		return s.fail("%v", err)
	}
	fmt.Fprintf(s.u.out, "Signed in: %s with the model %s. Stored in %s (readable by you only); acpbridge setup --sign-out removes the key.\n", endpoint, name, s.opt.Path)
	return 0
}

// stopped is the status for an answer setup could not take.
func (s *setup) stopped(err error) int {
	if errors.Is(err, context.Canceled) || errors.Is(err, errInterrupted) {
		fmt.Fprintln(s.u.out)
		fmt.Fprintln(s.stderr, "acpbridge setup: stopped; nothing was stored")
		return 130
	}
	return s.fail("%v; nothing was stored", err)
}

// endpoint is the endpoint to sign in to: asked at a terminal (flag, then
// stored, then OpenAI's offered), else the flag's, the stored one's or
// OpenAI's.
func (s *setup) endpoint(given string) (string, error) {
	def := firstOf(given, s.stored.Endpoint, DefaultEndpoint)
	if s.u.tty != nil {
		fmt.Fprintln(s.u.out, "The endpoint: OpenAI's, or any OpenAI-compatible one by URL (Ollama: http://localhost:11434/v1; OpenRouter: https://openrouter.ai/api/v1).")
		answer, err := s.u.ask("Endpoint [" + def + "]: ")
		if err != nil {
			return "", err
		}
		def = firstOf(answer, def)
	}
	def = strings.TrimSuffix(def, "/")
	if !strings.HasPrefix(def, "http://") && !strings.HasPrefix(def, "https://") {
		return "", fmt.Errorf("the endpoint %q is not an http:// or https:// URL", def)
	}
	return def, nil
}

// key is the key for endpoint: OPENAI_API_KEY with --from-env, asked
// without echo at a terminal, else stdin's first line. None given keeps
// the key stored for the same endpoint; an endpoint on this machine may
// have none.
func (s *setup) key(endpoint string, fromEnv bool) (string, error) {
	var key string
	var err error
	switch {
	case fromEnv:
		key = s.opt.Getenv("OPENAI_API_KEY")
	case s.u.tty != nil:
		key, err = s.u.secret("API key (not shown as you type; Enter alone keeps the stored one, or none for an endpoint on this machine): ")
	default:
		key, err = s.u.line()
		if errors.Is(err, io.EOF) {
			err = nil
		}
	}
	if err != nil {
		return "", err
	}
	key = strings.TrimSpace(key)
	if key == "" && s.stored.Key != "" && SameEndpoint(s.stored.Endpoint, endpoint) {
		key = s.stored.Key
	}
	if key == "" && !Local(endpoint) {
		where := "type it when asked, give it on stdin, or use --from-env with OPENAI_API_KEY set"
		return "", fmt.Errorf("%s needs a key, and none was given: %s", endpoint, where)
	}
	return key, nil
}

// check asks the endpoint for its models with the key: its models, or the
// status to exit with when it refuses the key or cannot be reached. An
// endpoint without GET /models lists none, and its key goes unchecked.
func (s *setup) check(endpoint, key string) ([]string, int) {
	if s.u.tty != nil {
		fmt.Fprintf(s.u.out, "Checking the key against %s/models ...\n", endpoint)
	}
	ctx, cancel := context.WithTimeout(s.u.ctx, checkTimeout)
	defer cancel()
	models, err := model.ListModels(ctx, endpoint, key)
	var ee *model.EndpointError
	switch {
	case err == nil:
		return models, 0
	case errors.As(err, &ee) && ee.Refused():
		return nil, s.fail("%s refused the key (%s): %s; nothing was stored", endpoint, ee.Status, ee.Message)
	case errors.As(err, &ee) && (ee.Code == http.StatusNotFound || ee.Code == http.StatusMethodNotAllowed):
		fmt.Fprintf(s.stderr, "acpbridge setup: %s lists no models (GET /models answered %s): the key could not be checked\n", endpoint, ee.Status)
		return nil, 0
	case s.u.ctx.Err() != nil:
		return nil, s.stopped(s.u.ctx.Err())
	}
	return nil, s.fail("cannot check the key: %v (is the endpoint right, and reachable from here?); nothing was stored", err)
}

// model is the model to use: the flag's; at a terminal, chosen from what
// the endpoint lists (by number or name); else the stored one, or the only
// one listed.
func (s *setup) model(given string, models []string) (string, error) {
	def := given
	if def == "" && (len(models) == 0 || slices.Contains(models, s.stored.Model)) {
		def = s.stored.Model
	}
	if s.u.tty == nil || given != "" {
		if def == "" && len(models) == 1 {
			def = models[0]
		}
		if def == "" {
			return "", fmt.Errorf("name the model with --model NAME (the endpoint lists %s)", listed(models))
		}
		return def, nil
	}
	for i, m := range models[:min(len(models), shownModels)] {
		fmt.Fprintf(s.u.out, "%4d  %s\n", i+1, m)
	}
	if len(models) > shownModels {
		fmt.Fprintf(s.u.out, "      ... and %d more: type a name\n", len(models)-shownModels)
	}
	for {
		prompt := "Model (a number or a name): "
		if def != "" {
			prompt = "Model (a number or a name) [" + def + "]: "
		}
		answer, err := s.u.ask(prompt)
		if err != nil {
			return "", err
		}
		if n, err := strconv.Atoi(answer); err == nil && n >= 1 && n <= len(models) {
			return models[n-1], nil
		}
		if answer = firstOf(answer, def); answer != "" {
			return answer, nil
		}
	}
}

// listed names models for a message.
func listed(models []string) string {
	switch {
	case len(models) == 0:
		return "none"
	case len(models) > 10:
		return strings.Join(models[:10], ", ") + fmt.Sprintf(" and %d more", len(models)-10)
	}
	return strings.Join(models, ", ")
}

func firstOf(values ...string) string {
	for _, v := range values {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}
