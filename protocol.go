// protocol.go holds the ACP v1 wire types acpbridge reads and writes, the
// method names, and the hand-written encoder for the streamed chunk updates.
//
// Inbound types are decoded leniently (unknown fields and _meta are ignored).
// Outbound types mirror schema.json: required fields carry no omitempty.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

const protocolVersion = 1

// Methods served (client → agent).
const (
	methodInitialize      = "initialize"
	methodAuthenticate    = "authenticate"
	methodSessionNew      = "session/new"
	methodSessionLoad     = "session/load"
	methodSessionResume   = "session/resume"
	methodSessionList     = "session/list"
	methodSessionDelete   = "session/delete"
	methodSessionClose    = "session/close"
	methodSessionPrompt   = "session/prompt"
	methodSessionCancel   = "session/cancel"
	methodSessionSetMode  = "session/set_mode"
	methodSessionSetConf  = "session/set_config_option"
	methodCancelRequest   = "$/cancel_request"
	methodSessionUpdate   = "session/update"
	methodRequestPermit   = "session/request_permission"
	methodFSRead          = "fs/read_text_file"
	methodFSWrite         = "fs/write_text_file"
	methodTerminalCreate  = "terminal/create"
	methodTerminalOutput  = "terminal/output"
	methodTerminalWait    = "terminal/wait_for_exit"
	methodTerminalKill    = "terminal/kill"
	methodTerminalRelease = "terminal/release"
)

// Stop reasons.
const (
	stopEndTurn         = "end_turn"
	stopMaxTokens       = "max_tokens"
	stopMaxTurnRequests = "max_turn_requests"
	stopRefusal         = "refusal"
	stopCancelled       = "cancelled"
	stopToolUse         = "tool_use" // the model's, never sent to the client
)

// --- initialize ---

type initializeParams struct {
	ProtocolVersion    json.RawMessage    `json:"protocolVersion"`
	ClientCapabilities clientCapabilities `json:"clientCapabilities"`
}

type clientCapabilities struct {
	FS struct {
		ReadTextFile  bool `json:"readTextFile"`
		WriteTextFile bool `json:"writeTextFile"`
	} `json:"fs"`
	Terminal bool `json:"terminal"`
	Meta     struct {
		TerminalOutput bool `json:"terminal_output"` // Zed: it renders terminals inline
	} `json:"_meta"`
}

type initializeResult struct {
	ProtocolVersion   int               `json:"protocolVersion"`
	AgentCapabilities agentCapabilities `json:"agentCapabilities"`
	AuthMethods       []struct{}        `json:"authMethods"`
	AgentInfo         implementation    `json:"agentInfo"`
}

type agentCapabilities struct {
	LoadSession         bool                `json:"loadSession"`
	PromptCapabilities  promptCapabilities  `json:"promptCapabilities"`
	McpCapabilities     mcpCapabilities     `json:"mcpCapabilities"`
	SessionCapabilities sessionCapabilities `json:"sessionCapabilities"`
}

type promptCapabilities struct {
	Image           bool `json:"image"`
	Audio           bool `json:"audio"`
	EmbeddedContext bool `json:"embeddedContext"`
}

type mcpCapabilities struct {
	HTTP bool `json:"http"`
	SSE  bool `json:"sse"`
}

// marker is a capability marker object: {} when supported, absent when not.
type marker *struct{}

var supported marker = &struct{}{}

type sessionCapabilities struct {
	Close                 marker `json:"close,omitempty"`
	List                  marker `json:"list,omitempty"`
	Resume                marker `json:"resume,omitempty"`
	Delete                marker `json:"delete,omitempty"`
	AdditionalDirectories marker `json:"additionalDirectories,omitempty"`
}

type implementation struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

// --- sessions ---

// sessionParams covers session/new, load and resume.
type sessionParams struct {
	SessionID             *string         `json:"sessionId"`
	Cwd                   *string         `json:"cwd"`
	McpServers            json.RawMessage `json:"mcpServers"`
	AdditionalDirectories []string        `json:"additionalDirectories"`
}

type sessionIDParams struct {
	SessionID *string `json:"sessionId"`
}

type newSessionResult struct {
	SessionID     string         `json:"sessionId"`
	Modes         *modeState     `json:"modes,omitempty"`
	ConfigOptions []configOption `json:"configOptions,omitempty"`
}

type openSessionResult struct {
	Modes         *modeState     `json:"modes,omitempty"`
	ConfigOptions []configOption `json:"configOptions,omitempty"`
}

type modeState struct {
	CurrentModeID  string        `json:"currentModeId"`
	AvailableModes []sessionMode `json:"availableModes"`
}

type sessionMode struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

type configOption struct {
	ID           string         `json:"id"`
	Name         string         `json:"name"`
	Description  string         `json:"description,omitempty"`
	Category     string         `json:"category,omitempty"`
	Type         string         `json:"type"`
	CurrentValue string         `json:"currentValue"`
	Options      []selectOption `json:"options"`
}

type selectOption struct {
	Value       string `json:"value"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

type setModeParams struct {
	SessionID *string `json:"sessionId"`
	ModeID    *string `json:"modeId"`
}

type setConfigParams struct {
	SessionID *string         `json:"sessionId"`
	ConfigID  *string         `json:"configId"`
	Value     json.RawMessage `json:"value"`
}

type configOptionsResult struct {
	ConfigOptions []configOption `json:"configOptions"`
}

type listParams struct {
	Cwd    string `json:"cwd"`
	Cursor string `json:"cursor"`
}

type listResult struct {
	Sessions   []sessionInfo `json:"sessions"`
	NextCursor string        `json:"nextCursor,omitempty"`
}

type sessionInfo struct {
	SessionID             string   `json:"sessionId"`
	Cwd                   string   `json:"cwd"`
	AdditionalDirectories []string `json:"additionalDirectories,omitempty"`
	Title                 string   `json:"title,omitempty"`
	UpdatedAt             string   `json:"updatedAt,omitempty"`
}

// --- prompt turns ---

type promptParams struct {
	SessionID *string           `json:"sessionId"`
	Prompt    []json.RawMessage `json:"prompt"`
}

type promptResult struct {
	StopReason string `json:"stopReason"`
}

// contentBlock is an ACP (= MCP) content block as received.
type contentBlock struct {
	Type        string            `json:"type"`
	Text        *string           `json:"text,omitempty"`
	Data        string            `json:"data,omitempty"`
	MimeType    string            `json:"mimeType,omitempty"`
	URI         string            `json:"uri,omitempty"`
	Name        string            `json:"name,omitempty"`
	Title       string            `json:"title,omitempty"`
	Description string            `json:"description,omitempty"`
	Resource    *resourceContents `json:"resource,omitempty"`
}

type resourceContents struct {
	URI      string  `json:"uri"`
	Text     *string `json:"text,omitempty"`
	Blob     *string `json:"blob,omitempty"`
	MimeType string  `json:"mimeType,omitempty"`
}

type textContent struct {
	Type string `json:"type"` // "text"
	Text string `json:"text"`
}

func textBlock(s string) textContent { return textContent{Type: "text", Text: s} }

// --- session/update payloads other than the streamed chunks ---

type sessionNotification struct {
	SessionID string `json:"sessionId"`
	Update    any    `json:"update"`
}

type sessionInfoUpdate struct {
	SessionUpdate string `json:"sessionUpdate"` // "session_info_update"
	Title         string `json:"title,omitempty"`
	UpdatedAt     string `json:"updatedAt,omitempty"`
}

type userMessageChunk struct {
	SessionUpdate string          `json:"sessionUpdate"` // "user_message_chunk"
	Content       json.RawMessage `json:"content"`
	MessageID     string          `json:"messageId,omitempty"`
}

type currentModeUpdate struct {
	SessionUpdate string `json:"sessionUpdate"` // "current_mode_update"
	CurrentModeID string `json:"currentModeId"`
}

type configOptionUpdate struct {
	SessionUpdate string         `json:"sessionUpdate"` // "config_option_update"
	ConfigOptions []configOption `json:"configOptions"`
}

// appendChunkUpdate appends the session/update params of one streamed
// message or thought chunk. It is the hot path of a turn, so it is written by
// hand rather than through reflection.
func appendChunkUpdate(b []byte, sessionID, kind, messageID, text string) []byte {
	b = append(b, `{"sessionId":`...)
	b = appendJSONString(b, sessionID)
	b = append(b, `,"update":{"sessionUpdate":"`...)
	b = append(b, kind...)
	b = append(b, `","messageId":`...)
	b = appendJSONString(b, messageID)
	b = append(b, `,"content":{"type":"text","text":`...)
	b = appendJSONString(b, text)
	return append(b, "}}}"...)
}

// appendToolCallUpdate appends the session/update params of a tool_call or
// tool_call_update. Its raw fields hold compact JSON made by acpbridge (or
// compacted on arrival, see modelStream.toolCall), so they are spliced in
// as they are rather than scanned again as encoding/json would.
func appendToolCallUpdate(b []byte, sessionID string, u *toolCallUpdate) []byte {
	b = append(b, `{"sessionId":`...)
	b = appendJSONString(b, sessionID)
	b = append(b, `,"update":{"sessionUpdate":`...)
	b = appendJSONString(b, u.SessionUpdate)
	b = append(b, `,"toolCallId":`...)
	b = appendJSONString(b, u.ToolCallID)
	for _, f := range [...]struct{ name, value string }{{"title", u.Title}, {"kind", u.Kind}, {"status", u.Status}} {
		if f.value != "" {
			b = append(b, ',', '"')
			b = append(b, f.name...)
			b = append(b, '"', ':')
			b = appendJSONString(b, f.value)
		}
	}
	for _, f := range [...]struct {
		name  string
		value json.RawMessage
	}{{"locations", u.Locations}, {"content", u.Content}, {"rawInput", u.RawInput}, {"rawOutput", u.RawOutput}} {
		if len(f.value) > 0 {
			b = append(b, ',', '"')
			b = append(b, f.name...)
			b = append(b, '"', ':')
			b = append(b, f.value...)
		}
	}
	return append(b, "}}"...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD,
// as encoding/json does; HTML characters are left alone.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = fmt.Appendf(b, `\u%04x`, r)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// marshal encodes v as compact JSON without escaping <, > and &, which
// encoding/json does by default for HTML's sake.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// mustJSON encodes v, which is known to encode.
func mustJSON(v any) json.RawMessage {
	b, err := marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
