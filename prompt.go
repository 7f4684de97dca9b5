// prompt.go admits turns: session/prompt (its blocks checked, images
// bounded), session/cancel, and what a turn tells the client. The turn
// itself is turn.go's.

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"acpbridge/internal/acp"
	"acpbridge/internal/model"
)

// admitPrompt admits a turn: from here on a session/cancel or close that
// arrives applies to it, even before its step runs. A prompt that arrives
// while its session is still opening runs after the opening; one that
// arrives while a cancelled turn winds down runs after it; one that arrives
// while a turn runs is refused (1003).
func (a *agent) admitPrompt(id string, p *acp.PromptParams) admission {
	if n := len(p.Prompt); n > a.cfg.maxPromptBlocks {
		return refuse(acp.InvalidParams("prompt", "has %d content blocks; acpbridge takes at most %d in one prompt (--max-prompt-blocks): join the text blocks", n, a.cfg.maxPromptBlocks))
	}
	blocks, err := parsePrompt(p.Prompt)
	if err == nil && a.model == nil {
		err = a.errNoModel()
	}
	if err != nil {
		return refuse(err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	b, err := a.requireLocked(id)
	switch {
	case err != nil:
		return refuse(err)
	case a.ahead.ending:
		return refuse(errEnding(acp.MethodSessionPrompt))
	case a.ahead.turn.running():
		return refuse(acp.Errorf(acp.CodeTurnRunning,
			"a turn is already running in session %s; wait for its response or cancel it with session/cancel before sending another prompt", id))
	}
	t := newTurn()
	a.ahead.turn = t
	in := &promptInput{blocks: blocks, raw: acp.Raw(p.Prompt), big: rawBytes(p.Prompt) > bigRequest}
	p.Prompt = nil
	return queueCancellable(func() (any, error) { return a.prompt(id, b, t, in) }, func(running bool) {
		t.cancel()
		if !running {
			a.mu.Lock()
			if a.ahead.turn == t {
				a.ahead.turn = nil
			}
			a.mu.Unlock()
		}
	})
}

// promptInput is an admitted prompt: the client's blocks as they came (for
// the log) and decoded. The turn takes each copy and lets it go.
type promptInput struct {
	blocks []acp.ContentBlock
	raw    []json.RawMessage
	big    bool // over bigRequest bytes
}

func rawBytes(raw []acp.Window) int {
	n := 0
	for _, r := range raw {
		n += len(r)
	}
	return n
}

// prompt is session/prompt's step: it runs the turn t in the live session.
func (a *agent) prompt(id string, b *box, t *turn, in *promptInput) (any, error) {
	defer func() {
		t.cancel()
		a.mu.Lock()
		if a.ahead.turn == t {
			a.ahead.turn = nil
		}
		a.mu.Unlock()
	}()
	s := a.sess
	if s == nil || s.box != b {
		return nil, acp.Errorf(acp.CodeResourceNotFound, "session %s did not open, so the prompt was not run; open it again with session/load or session/resume", id).
			WithData(map[string]string{"sessionId": id})
	}
	stop, err := a.runTurn(t.ctx, s, in)
	if err != nil {
		return nil, err
	}
	return acp.PromptResult{StopReason: stop}, nil
}

// admitCancel cancels the session's turn, admitted or running. It is a
// notification: it acts at arrival and answers nothing.
func (a *agent) admitCancel(id string, _ *acp.SessionIDParams) admission {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ahead.id == id && a.ahead.turn != nil {
		a.ahead.turn.cancel()
	}
	return answerNow(nil)
}

// errNoModel answers a prompt when no model is configured or --model's is
// not usable: without a sign-in, -32000 saying how to sign in.
func (a *agent) errNoModel() error {
	if a.signInNeeded != "" {
		return acp.Errorf(acp.CodeAuthRequired, "%s", a.signInNeeded)
	}
	if a.modelErr != nil {
		fix := "--model (replay:PATH of an existing fixture, or openai:MODEL)"
		if strings.Contains(a.modelErr.Error(), "--base-url") {
			fix = "--base-url (an http:// or https:// URL, such as http://localhost:11434/v1)"
		}
		return acp.Errorf(acp.CodeNoModel, "acpbridge cannot use its model: %v. Fix %s in the agent's command and start it again", a.modelErr, fix)
	}
	return acp.Errorf(acp.CodeNoModel,
		"no model is configured: start acpbridge with --model openai:MODEL (with OPENAI_API_KEY, and --base-url for Ollama and other servers) or --model replay:FIXTURE.jsonl, or set ACPBRIDGE_MODEL")
}

// The limits on images: one image at most imageMaxBytes decoded (the large
// hosted models' own limit), a prompt's images at most promptImageMaxBytes.
const (
	imageMaxBytes       = 20 << 20
	promptImageMaxBytes = 50 << 20
)

// parsePrompt checks every block of a prompt.
func parsePrompt(raw []acp.Window) ([]acp.ContentBlock, error) {
	if raw == nil {
		return nil, acp.InvalidParams("prompt", "required: an array of content blocks")
	}
	blocks := make([]acp.ContentBlock, len(raw))
	images := 0
	for i, r := range raw {
		field := fmt.Sprintf("prompt[%d]", i)
		if err := json.Unmarshal(r, &blocks[i]); err != nil {
			return nil, acp.InvalidParams(field, "not a content block: %v", err)
		}
		if err := checkBlock(field, &blocks[i]); err != nil {
			return nil, err
		}
		if images += imageBytes(&blocks[i]); images > promptImageMaxBytes {
			return nil, acp.InvalidParams(field, "brings the prompt's images to more than %d MiB, the most acpbridge sends in one prompt: send fewer or smaller images", promptImageMaxBytes>>20)
		}
	}
	return blocks, nil
}

// checkImage refuses an image block (field names it) without a MIME type,
// without data or a uri, whose data is not base64, or that is too large.
// The data is checked as it streams through the decoder: no decoded copy
// is made.
func checkImage(field string, b *acp.ContentBlock) error {
	switch {
	case !strings.HasPrefix(b.MimeType, "image/"):
		return acp.InvalidParams(field+".mimeType", "an image needs its MIME type (image/png, image/jpeg, ...), not %q", b.MimeType)
	case b.Data == "" && b.URI == "":
		return acp.InvalidParams(field, "an image needs data (base64) or a uri")
	case b.Data == "":
		return nil
	}
	// The size follows from the length: an image too large is refused
	// before its data is read.
	if n := imageBytes(b); n > imageMaxBytes {
		return acp.InvalidParams(field, "is a %.1f MiB image; acpbridge sends images of at most %d MiB: scale it down or crop it", float64(n)/(1<<20), imageMaxBytes>>20)
	}
	if _, err := io.Copy(io.Discard, base64.NewDecoder(base64.StdEncoding, strings.NewReader(b.Data))); err != nil {
		return acp.InvalidParams(field+".data", "is not valid base64 (%v); send the image's bytes base64-encoded (RFC 4648, standard alphabet, with padding)", err)
	}
	return nil
}

// imageBytes is the decoded size of an image block's data, or 0.
func imageBytes(b *acp.ContentBlock) int {
	if b.Type != "image" || b.Data == "" {
		return 0
	}
	return base64.StdEncoding.DecodedLen(len(b.Data)) - strings.Count(b.Data[max(0, len(b.Data)-2):], "=")
}

// promptImages are a prompt's images, as the model is sent them.
func promptImages(blocks []acp.ContentBlock) []model.Image {
	var out []model.Image
	for _, b := range blocks {
		if b.Type == "image" {
			out = append(out, model.Image{MimeType: b.MimeType, Data: b.Data, URI: b.URI})
		}
	}
	return out
}

// checkBlock refuses a prompt's content block (field names it) that lacks
// what its type needs, or whose type acpbridge does not take.
func checkBlock(field string, b *acp.ContentBlock) error {
	switch b.Type {
	case "text":
		if b.Text == nil {
			return acp.InvalidParams(field+".text", "required for a text block")
		}
	case "resource_link":
		if b.URI == "" || b.Name == "" {
			return acp.InvalidParams(field, "a resource_link needs uri and name")
		}
	case "resource":
		if b.Resource == nil || b.Resource.URI == "" || (b.Resource.Text == nil && b.Resource.Blob == nil) {
			return acp.InvalidParams(field+".resource", "an embedded resource needs uri and text or blob")
		}
	case "image":
		return checkImage(field, b)
	case "audio":
		return acp.InvalidParams(field, "audio content is not supported (promptCapabilities.audio is false); send text, image, resource_link or resource blocks")
	case "":
		return acp.InvalidParams(field+".type", "required")
	default:
		return acp.InvalidParams(field+".type", "unknown content block type %q", b.Type)
	}
	return nil
}

// promptText renders a prompt as the text the model reads.
func promptText(blocks []acp.ContentBlock) string {
	if len(blocks) == 1 && blocks[0].Type == "text" {
		return *blocks[0].Text // a pasted prompt is not copied again
	}
	var sb strings.Builder
	for i, b := range blocks {
		if i > 0 {
			sb.WriteString("\n\n")
		}
		switch b.Type {
		case "text":
			sb.WriteString(*b.Text)
		case "resource_link":
			fmt.Fprintf(&sb, "[%s](%s)", b.Name, b.URI)
		case "image":
			// The image itself goes with the message; the text says where
			// it stands (and a replay fixture's expect can see it).
			if b.Data != "" {
				fmt.Fprintf(&sb, "[image %s, %d bytes]", b.MimeType, imageBytes(&b))
			} else {
				fmt.Fprintf(&sb, "[image %s at %s]", b.MimeType, b.URI)
			}
		case "resource":
			r := b.Resource
			if r.Text != nil {
				fmt.Fprintf(&sb, "<resource uri=%q>\n%s\n</resource>", r.URI, *r.Text)
			} else {
				fmt.Fprintf(&sb, "<resource uri=%q mimeType=%q>(binary, %d base64 bytes)</resource>", r.URI, r.MimeType, len(*r.Blob))
			}
		}
	}
	return sb.String()
}

// titleFrom makes a session title from the first prompt.
func titleFrom(blocks []acp.ContentBlock) string {
	var t string
	for _, b := range blocks {
		switch {
		case b.Type == "text" && strings.TrimSpace(*b.Text) != "":
			t = *b.Text
		case b.Type == "resource_link":
			t = b.Name
		case b.Type == "resource":
			t = filepath.Base(b.Resource.URI)
		}
		if t != "" {
			break
		}
	}
	t = strings.TrimSpace(t)
	if i := strings.IndexByte(t, '\n'); i >= 0 {
		t = strings.TrimSpace(t[:i])
	}
	// 80 characters at most, counted over the title's start only (a pasted
	// prompt of megabytes on one line is not turned into runes whole).
	n, i := 0, 0
	for i < len(t) && n < 80 {
		_, size := utf8.DecodeRuneInString(t[i:])
		i, n = i+size, n+1
	}
	if i < len(t) {
		head := t[:i]
		_, last := utf8.DecodeLastRuneInString(head)
		t = head[:len(head)-last] + "…"
	}
	return strings.Clone(t) // not a window that keeps the whole prompt
}

// update sends a session/update with a struct payload and flushes.
func (a *agent) update(sessionID string, u any) error {
	if err := a.out.NotifyJSON(sessionID, u); err != nil {
		return err
	}
	return a.out.Flush()
}

// turn is one admitted session/prompt.
type turn struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func newTurn() *turn {
	ctx, cancel := context.WithCancel(context.Background())
	return &turn{ctx: ctx, cancel: cancel}
}

// running reports whether the turn has not been cancelled.
func (t *turn) running() bool { return t != nil && t.ctx.Err() == nil }
