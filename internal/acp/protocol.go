// Package acp holds the ACP v1 wire types acpbridge reads and writes, the
// method names, and the hand-written encoder for the streamed chunk updates.
//
// Inbound types are decoded leniently (unknown fields and _meta are ignored).
// Outbound types mirror schema.json: required fields carry no omitempty.
package acp

import (
	"bytes"
	"encoding/json"
	"strconv"

	"acpbridge/internal/jsonenc"
)

const ProtocolVersion = 1

// Methods served (client → agent).
const (
	MethodInitialize             = "initialize"
	MethodAuthenticate           = "authenticate"
	MethodLogout                 = "logout"
	MethodSessionNew             = "session/new"
	MethodSessionLoad            = "session/load"
	MethodSessionResume          = "session/resume"
	MethodSessionList            = "session/list"
	MethodSessionDelete          = "session/delete"
	MethodSessionClose           = "session/close"
	MethodSessionPrompt          = "session/prompt"
	MethodSessionCancel          = "session/cancel"
	MethodSessionSetMode         = "session/set_mode"
	MethodSessionSetConfigOption = "session/set_config_option"
	MethodCancelRequest          = "$/cancel_request"
)

// Methods sent (agent → client).
const (
	MethodSessionUpdate     = "session/update"
	MethodRequestPermission = "session/request_permission"
	MethodFSRead            = "fs/read_text_file"
	MethodFSWrite           = "fs/write_text_file"
	MethodTerminalCreate    = "terminal/create"
	MethodTerminalOutput    = "terminal/output"
	MethodTerminalWait      = "terminal/wait_for_exit"
	MethodTerminalKill      = "terminal/kill"
	MethodTerminalRelease   = "terminal/release"
)

// Mode is a session mode acpbridge offers: when it asks before a tool runs.
type Mode string

const (
	ModeAsk         Mode = "ask"          // before every edit, command and MCP tool that changes things
	ModeAcceptEdits Mode = "accept_edits" // before commands and MCP tools
	ModeReadOnly    Mode = "read_only"    // never: what changes things is refused
	ModeBypass      Mode = "bypass"       // never: everything runs
)

// StopReason is why a turn (or a model call) ended.
type StopReason string

const (
	StopEndTurn         StopReason = "end_turn"
	StopMaxTokens       StopReason = "max_tokens"
	StopMaxTurnRequests StopReason = "max_turn_requests"
	StopRefusal         StopReason = "refusal"
	StopCancelled       StopReason = "cancelled"
	StopToolUse         StopReason = "tool_use" // the model's, never sent to the client
)

// UpdateKind is a session/update's sessionUpdate tag; the constructors
// below set it.
type UpdateKind string

const (
	UpdateMessage      UpdateKind = "agent_message_chunk"
	UpdateThought      UpdateKind = "agent_thought_chunk"
	UpdateUserMessage  UpdateKind = "user_message_chunk"
	UpdateToolCall     UpdateKind = "tool_call"
	UpdateToolProgress UpdateKind = "tool_call_update"
	UpdatePlan         UpdateKind = "plan"
	UpdateUsage        UpdateKind = "usage_update"
	UpdateSessionInfo  UpdateKind = "session_info_update"
	UpdateCurrentMode  UpdateKind = "current_mode_update"
	UpdateConfigOption UpdateKind = "config_option_update"
	UpdateNotice       UpdateKind = "notice"            // only to a client that opted in
	UpdateCompaction   UpdateKind = "compaction_update" // only to a client that opted in
)

// ToolKind is what a tool call does, for the client's icon.
type ToolKind string

const (
	KindRead    ToolKind = "read"
	KindEdit    ToolKind = "edit"
	KindSearch  ToolKind = "search"
	KindExecute ToolKind = "execute"
	KindThink   ToolKind = "think"
	KindFetch   ToolKind = "fetch"
	KindOther   ToolKind = "other"
)

// ToolStatus is where a tool call stands.
type ToolStatus string

const (
	StatusPending    ToolStatus = "pending"
	StatusInProgress ToolStatus = "in_progress"
	StatusCompleted  ToolStatus = "completed"
	StatusFailed     ToolStatus = "failed"
)

// --- initialize ---

type InitializeParams struct {
	ProtocolVersion    json.RawMessage    `json:"protocolVersion"`
	ClientCapabilities ClientCapabilities `json:"clientCapabilities"`
}

type ClientCapabilities struct {
	FS struct {
		ReadTextFile  bool `json:"readTextFile"`
		WriteTextFile bool `json:"writeTextFile"`
	} `json:"fs"`
	Terminal bool `json:"terminal"`
	Meta     struct {
		TerminalOutput bool `json:"terminal_output"` // Zed: it renders terminals inline
		// TerminalAuth is the older way to announce terminal sign-in
		// (the ACP Registry's own check sends it); raw, as Auth's.
		TerminalAuth json.RawMessage `json:"terminal-auth"`
	} `json:"_meta"`
	// Auth.Terminal is kept raw: true announces terminal sign-in, and
	// anything else (absent, null, another type) means it cannot run one.
	Auth struct {
		Terminal json.RawMessage `json:"terminal"`
	} `json:"auth"`
	// Session's members are kept raw: {} opts in, and anything else
	// (absent, null, a value of the wrong type) means unsupported rather
	// than failing initialize.
	Session struct {
		Notices    json.RawMessage `json:"notices"`
		Compaction json.RawMessage `json:"compaction"`
	} `json:"session"`
}

// Notices reports whether the client opted into notice updates
// (clientCapabilities.session.notices): an agent must not send one
// otherwise.
func (c ClientCapabilities) Notices() bool { return isObject(c.Session.Notices) }

// Compaction reports whether the client opted into compaction updates
// (clientCapabilities.session.compaction).
func (c ClientCapabilities) Compaction() bool { return isObject(c.Session.Compaction) }

// TerminalAuth reports whether the client can run a terminal sign-in
// (clientCapabilities.auth.terminal, or the older _meta["terminal-auth"]):
// an agent must not offer one otherwise.
func (c ClientCapabilities) TerminalAuth() bool {
	return isTrue(c.Auth.Terminal) || isTrue(c.Meta.TerminalAuth)
}

func isTrue(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "true" }

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}

type InitializeResult struct {
	ProtocolVersion   int               `json:"protocolVersion"`
	AgentCapabilities AgentCapabilities `json:"agentCapabilities"`
	AuthMethods       []AuthMethod      `json:"authMethods"`
	AgentInfo         Implementation    `json:"agentInfo"`
}

// AuthenticateParams names the sign-in method to use.
type AuthenticateParams struct {
	MethodID string `json:"methodId"`
}

// AuthMethod is a way to sign in: of type agent (no type: the agent signs
// in through authenticate) or terminal (the client runs the agent's
// command with Args in a terminal, and never passes it to authenticate).
type AuthMethod struct {
	Type        string   `json:"type,omitempty"`
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Args        []string `json:"args,omitempty"`
}

type AgentCapabilities struct {
	LoadSession         bool                `json:"loadSession"`
	PromptCapabilities  PromptCapabilities  `json:"promptCapabilities"`
	McpCapabilities     McpCapabilities     `json:"mcpCapabilities"`
	SessionCapabilities SessionCapabilities `json:"sessionCapabilities"`
	Auth                AgentAuth           `json:"auth"`
}

// AgentAuth is what the agent offers of sign-in besides its methods.
type AgentAuth struct {
	Logout marker `json:"logout,omitempty"`
}

type PromptCapabilities struct {
	Image           bool `json:"image"`
	Audio           bool `json:"audio"`
	EmbeddedContext bool `json:"embeddedContext"`
}

type McpCapabilities struct {
	HTTP bool `json:"http"`
	SSE  bool `json:"sse"`
}

// marker is a capability marker object: {} when supported, absent when not.
type marker *struct{}

var Supported marker = &struct{}{}

type SessionCapabilities struct {
	Close                 marker `json:"close,omitempty"`
	List                  marker `json:"list,omitempty"`
	Resume                marker `json:"resume,omitempty"`
	Delete                marker `json:"delete,omitempty"`
	AdditionalDirectories marker `json:"additionalDirectories,omitempty"`
	// SystemPrompt offers a client system prompt on new, load and resume
	// (ACP's, still marked unstable in the newest schema file in reach).
	SystemPrompt *SystemPromptCapabilities `json:"systemPrompt,omitempty"`
}

// SystemPromptCapabilities: append always; override where Mode says so.
type SystemPromptCapabilities struct {
	Mode SystemPromptModes `json:"mode"`
}

// SystemPromptModes are the modes offered besides append.
type SystemPromptModes struct {
	Override marker `json:"override,omitempty"`
}

type Implementation struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

// --- sessions ---

// NewSessionParams are session/new's params.
type NewSessionParams struct {
	Cwd                   *string         `json:"cwd"`
	McpServers            json.RawMessage `json:"mcpServers"`
	AdditionalDirectories []string        `json:"additionalDirectories"`
	SystemPrompt          *SystemPrompt   `json:"systemPrompt"`
}

// SystemPrompt is a client's system prompt for a session: its mode
// (SystemPromptAppend or SystemPromptOverride) and its content blocks
// (text only).
type SystemPrompt struct {
	Mode    string            `json:"mode"`
	Content []json.RawMessage `json:"content"`
}

const (
	SystemPromptAppend   = "append"   // after acpbridge's own instructions
	SystemPromptOverride = "override" // instead of them
)

// LoadSessionParams are session/load's and session/resume's params.
type LoadSessionParams struct {
	SessionID *string `json:"sessionId"`
	NewSessionParams
}

type SessionIDParams struct {
	SessionID *string `json:"sessionId"`
}

// Session returns the sessionId a request's params name (nil when absent).
func (p *LoadSessionParams) Session() *string { return p.SessionID }
func (p *SessionIDParams) Session() *string   { return p.SessionID }
func (p *PromptParams) Session() *string      { return p.SessionID }
func (p *SetModeParams) Session() *string     { return p.SessionID }
func (p *SetConfigParams) Session() *string   { return p.SessionID }

type NewSessionResult struct {
	SessionID     string         `json:"sessionId"`
	Modes         *ModeState     `json:"modes,omitempty"`
	ConfigOptions []ConfigOption `json:"configOptions,omitempty"`
}

type OpenSessionResult struct {
	Modes         *ModeState     `json:"modes,omitempty"`
	ConfigOptions []ConfigOption `json:"configOptions,omitempty"`
}

type ModeState struct {
	CurrentModeID  Mode          `json:"currentModeId"`
	AvailableModes []SessionMode `json:"availableModes"`
}

type SessionMode struct {
	ID          Mode   `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

type ConfigOption struct {
	ID           string         `json:"id"`
	Name         string         `json:"name"`
	Description  string         `json:"description,omitempty"`
	Category     string         `json:"category,omitempty"`
	Type         string         `json:"type"`
	CurrentValue string         `json:"currentValue"`
	Options      []SelectOption `json:"options"`
}

type SelectOption struct {
	Value       string `json:"value"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

type SetModeParams struct {
	SessionID *string `json:"sessionId"`
	ModeID    *string `json:"modeId"`
}

type SetConfigParams struct {
	SessionID *string         `json:"sessionId"`
	ConfigID  *string         `json:"configId"`
	Value     json.RawMessage `json:"value"`
}

type ConfigOptionsResult struct {
	ConfigOptions []ConfigOption `json:"configOptions"`
}

type ListParams struct {
	Cwd    string `json:"cwd"`
	Cursor string `json:"cursor"`
}

type ListResult struct {
	Sessions   []SessionInfo `json:"sessions"`
	NextCursor string        `json:"nextCursor,omitempty"`
}

type SessionInfo struct {
	SessionID             string   `json:"sessionId"`
	Cwd                   string   `json:"cwd"`
	AdditionalDirectories []string `json:"additionalDirectories,omitempty"`
	Title                 string   `json:"title,omitempty"`
	UpdatedAt             string   `json:"updatedAt,omitempty"`
}

// --- prompt turns ---

type PromptParams struct {
	SessionID *string  `json:"sessionId"`
	Prompt    []Window `json:"prompt"` // windows on the message's line: a pasted prompt is not copied
}

// Window is a JSON value decoded without a copy: a window on the bytes it
// was decoded from, which must not change while it is held. A message's
// line is never reused, so its members and a prompt's blocks can be held
// this way, and a huge prompt costs its line once on its way in, not a
// copy per decode.
type Window []byte

func (w *Window) UnmarshalJSON(b []byte) error {
	*w = b
	return nil
}

// Raw is ws as json.RawMessage values (no copy).
func Raw(ws []Window) []json.RawMessage {
	out := make([]json.RawMessage, len(ws))
	for i, w := range ws {
		out[i] = json.RawMessage(w)
	}
	return out
}

type PromptResult struct {
	StopReason StopReason `json:"stopReason"`
}

// ContentBlock is an ACP (= MCP) content block as received.
type ContentBlock struct {
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

// --- tool calls ---

// Location is an ACP ToolCallLocation.
type Location struct {
	Path string `json:"path"`
	Line int    `json:"line,omitempty"`
}

// ToolCallUpdate is the payload of tool_call and tool_call_update, and the
// toolCall of a permission request (without sessionUpdate).
type ToolCallUpdate struct {
	SessionUpdate UpdateKind      `json:"sessionUpdate,omitempty"`
	ToolCallID    string          `json:"toolCallId"`
	Title         string          `json:"title,omitempty"`
	Name          string          `json:"name,omitempty"` // the tool's programmatic name
	Kind          ToolKind        `json:"kind,omitempty"`
	Status        ToolStatus      `json:"status,omitempty"`
	Locations     json.RawMessage `json:"locations,omitempty"`
	Content       json.RawMessage `json:"content,omitempty"`
	RawInput      json.RawMessage `json:"rawInput,omitempty"`
	RawOutput     json.RawMessage `json:"rawOutput,omitempty"`
}

// ToolContent is an ACP ToolCallContent.
type ToolContent struct {
	Type       string          `json:"type"`              // content, diff or terminal
	Content    json.RawMessage `json:"content,omitempty"` // a content block`
	Path       string          `json:"path,omitempty"`
	OldText    *string         `json:"oldText,omitempty"`
	NewText    *string         `json:"newText,omitempty"`
	TerminalID string          `json:"terminalId,omitempty"`

	Text string `json:"-"` // a text block's text, for capping and storing it once
}

func TextOut(s string) ToolContent {
	b := jsonenc.AppendString(append(make([]byte, 0, len(s)+len(s)/8+32), `{"type":"text","text":`...), s) // room for escapes
	return ToolContent{Type: "content", Content: append(b, '}'), Text: s}
}

// LocationsJSON is locs as encoding/json writes them.
func LocationsJSON(locs []Location) json.RawMessage {
	b := []byte{'['}
	for i, l := range locs {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonenc.AppendString(append(b, `{"path":`...), l.Path)
		if l.Line != 0 {
			b = strconv.AppendInt(append(b, `,"line":`...), int64(l.Line), 10)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// --- session/update payloads other than the streamed chunks ---

type SessionNotification struct {
	SessionID string `json:"sessionId"`
	Update    any    `json:"update"`
}

type SessionInfoUpdate struct {
	SessionUpdate UpdateKind `json:"sessionUpdate"` // "session_info_update"
	Title         string     `json:"title,omitempty"`
	UpdatedAt     string     `json:"updatedAt,omitempty"`
}

type UserMessageChunk struct {
	SessionUpdate UpdateKind      `json:"sessionUpdate"` // "user_message_chunk"
	Content       json.RawMessage `json:"content"`
	MessageID     string          `json:"messageId,omitempty"`
}

type CurrentModeUpdate struct {
	SessionUpdate UpdateKind `json:"sessionUpdate"` // "current_mode_update"
	CurrentModeID Mode       `json:"currentModeId"`
}

type ConfigOptionUpdate struct {
	SessionUpdate UpdateKind     `json:"sessionUpdate"` // "config_option_update"
	ConfigOptions []ConfigOption `json:"configOptions"`
}

// AppendToolContents appends cs as encoding/json would write them, its
// content blocks (compact JSON already) copied as they are.
func AppendToolContents(b []byte, cs []ToolContent) []byte {
	if cs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, c := range cs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":`...)
		b = jsonenc.AppendString(b, c.Type)
		if len(c.Content) > 0 {
			b = append(b, `,"content":`...)
			b = append(b, c.Content...)
		}
		for _, f := range [...]struct {
			name  string
			value *string
		}{{"path", &c.Path}, {"oldText", c.OldText}, {"newText", c.NewText}, {"terminalId", &c.TerminalID}} {
			if f.value != nil && (*f.value != "" || f.name == "oldText" || f.name == "newText") {
				b = append(b, ',', '"')
				b = append(b, f.name...)
				b = append(b, '"', ':')
				b = jsonenc.AppendString(b, *f.value)
			}
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// The constructors of session/update payloads: each sets its tag.

// ToolCallStart announces a call of the tool name: tool_call, pending.
func ToolCallStart(id, name, title string, kind ToolKind, locations, rawInput json.RawMessage) ToolCallUpdate {
	return ToolCallUpdate{SessionUpdate: UpdateToolCall, ToolCallID: id, Title: title, Name: name, Kind: kind,
		Status: StatusPending, Locations: locations, RawInput: rawInput}
}

// ToolCallProgress is a tool_call_update to status, with content and raw
// output when it has them.
func ToolCallProgress(id string, status ToolStatus, content, rawOutput json.RawMessage) ToolCallUpdate {
	return ToolCallUpdate{SessionUpdate: UpdateToolProgress, ToolCallID: id, Status: status, Content: content, RawOutput: rawOutput}
}

func SessionInfoChanged(title, updatedAt string) SessionInfoUpdate {
	return SessionInfoUpdate{SessionUpdate: UpdateSessionInfo, Title: title, UpdatedAt: updatedAt}
}

func UserMessage(content json.RawMessage, messageID string) UserMessageChunk {
	return UserMessageChunk{SessionUpdate: UpdateUserMessage, Content: content, MessageID: messageID}
}

func CurrentMode(modeID Mode) CurrentModeUpdate {
	return CurrentModeUpdate{SessionUpdate: UpdateCurrentMode, CurrentModeID: modeID}
}

func ConfigOptionsChanged(opts []ConfigOption) ConfigOptionUpdate {
	return ConfigOptionUpdate{SessionUpdate: UpdateConfigOption, ConfigOptions: opts}
}

// NoticeUpdate is a notice: live information for the user, not history.
type NoticeUpdate struct {
	SessionUpdate UpdateKind `json:"sessionUpdate"` // "notice"
	Severity      string     `json:"severity"`      // info, warning or error
	Title         string     `json:"title"`
	Description   string     `json:"description,omitempty"`
}

func Notice(severity, title, description string) NoticeUpdate {
	return NoticeUpdate{SessionUpdate: UpdateNotice, Severity: severity, Title: title, Description: description}
}

// CompactionUpdate is a compaction_update: a context compaction, by its
// id, with its status and a summary of what it left out.
type CompactionUpdate struct {
	SessionUpdate UpdateKind      `json:"sessionUpdate"` // "compaction_update"
	CompactionID  string          `json:"compactionId"`
	Status        string          `json:"status"` // in_progress, completed, failed or cancelled
	Summary       json.RawMessage `json:"summary,omitempty"`
	Error         string          `json:"error,omitempty"`
}

// Compaction is a compaction_update whose summary is one text block.
func Compaction(id, status, summary, errText string) CompactionUpdate {
	u := CompactionUpdate{SessionUpdate: UpdateCompaction, CompactionID: id, Status: status, Error: errText}
	if summary != "" {
		u.Summary = MustJSON([]textContent{textBlock(summary)})
	}
	return u
}

// UsageUpdate is the usage_update session update: how full the context
// is after a model call, and what the session has cost where the
// provider says.
type UsageUpdate struct {
	SessionUpdate UpdateKind `json:"sessionUpdate"` // "usage_update"
	Used          int64      `json:"used"`
	Size          int64      `json:"size"`
	Cost          *Cost      `json:"cost,omitempty"`
}

// Cost is a session's cumulative cost.
type Cost struct {
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
}

// Usage is a usage_update; cost, in USD, only when known.
func Usage(used, size int64, cost *float64) UsageUpdate {
	u := UsageUpdate{SessionUpdate: UpdateUsage, Used: used, Size: size}
	if cost != nil {
		u.Cost = &Cost{Amount: *cost, Currency: "USD"}
	}
	return u
}

func Plan(entries json.RawMessage) PlanUpdate {
	return PlanUpdate{SessionUpdate: UpdatePlan, Entries: entries}
}

// PlanUpdate is the plan session update.
type PlanUpdate struct {
	SessionUpdate UpdateKind      `json:"sessionUpdate"` // "plan"
	Entries       json.RawMessage `json:"entries"`
}

// AppendChunkUpdate appends the session/update params of one streamed
// message or thought chunk. It is the hot path of a turn, so it is written by
// hand rather than through reflection.
func AppendChunkUpdate(b []byte, sessionID string, kind UpdateKind, messageID, text string) []byte {
	b = append(b, `{"sessionId":`...)
	b = jsonenc.AppendString(b, sessionID)
	b = append(b, `,"update":{"sessionUpdate":"`...)
	b = append(b, string(kind)...)
	b = append(b, `","messageId":`...)
	b = jsonenc.AppendString(b, messageID)
	b = append(b, `,"content":{"type":"text","text":`...)
	b = jsonenc.AppendString(b, text)
	return append(b, "}}}"...)
}

// AppendToolCallUpdate appends the session/update params of a tool_call or
// tool_call_update. Its raw fields hold compact JSON made by acpbridge (or
// compacted on arrival by the root's modelStream.ToolCall), so they are spliced in
// as they are rather than scanned again as encoding/json would.
func AppendToolCallUpdate(b []byte, sessionID string, u *ToolCallUpdate) []byte {
	b = append(b, `{"sessionId":`...)
	b = jsonenc.AppendString(b, sessionID)
	b = append(b, `,"update":{"sessionUpdate":`...)
	b = jsonenc.AppendString(b, string(u.SessionUpdate))
	b = append(b, `,"toolCallId":`...)
	b = jsonenc.AppendString(b, u.ToolCallID)
	for _, f := range [...]struct{ name, value string }{{"title", u.Title}, {"name", u.Name}, {"kind", string(u.Kind)}, {"status", string(u.Status)}} {
		if f.value != "" {
			b = append(b, ',', '"')
			b = append(b, f.name...)
			b = append(b, '"', ':')
			b = jsonenc.AppendString(b, f.value)
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

// CancelledRequest is the id a $/cancel_request's params name, as compact
// JSON (the form a request's id is kept in), or nil when they name none.
func CancelledRequest(params json.RawMessage) []byte {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil || len(p.RequestID) == 0 {
		return nil
	}
	return CompactID(p.RequestID)
}

// CompactID is a request id as compact JSON, the one form ids are kept and
// matched in (1, not 1.0's spacing or " 1"), or nil when it is not JSON.
func CompactID(id json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, id) != nil {
		return nil
	}
	return b.Bytes()
}

// WithID is a JSON-RPC message line (a request or a response) with its id
// replaced by id; a line that is not a JSON object is given back as it is.
func WithID(line []byte, id json.RawMessage) []byte {
	var fields map[string]json.RawMessage
	if json.Unmarshal(line, &fields) != nil {
		return line
	}
	fields["id"] = id
	b, err := json.Marshal(fields)
	if err != nil {
		return line
	}
	return b
}

// Marshal encodes v as compact JSON without escaping <, > and &.
func Marshal(v any) ([]byte, error) { return jsonenc.Marshal(v) }

// MustJSON encodes v, which is known to encode.
func MustJSON(v any) json.RawMessage {
	b, err := jsonenc.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// The permission options acpbridge offers, by their ids (each id is also
// its kind).
const (
	AllowOnce    = "allow_once"
	AllowAlways  = "allow_always"
	RejectOnce   = "reject_once"
	RejectAlways = "reject_always"
)

// PermissionOptionIDs are the ids of the options offered, in order.
var PermissionOptionIDs = []string{AllowOnce, AllowAlways, RejectOnce, RejectAlways}

// PermissionRequest is session/request_permission's params. Members are
// in name order, as a map would write them.
type PermissionRequest struct {
	Options   []PermissionOption `json:"options"`
	SessionID string             `json:"sessionId"`
	ToolCall  ToolCallUpdate     `json:"toolCall"`
}

// PermissionOption is one choice offered to the user.
type PermissionOption struct {
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	OptionID string `json:"optionId"`
}

// NewPermissionRequest asks whether the tool call id (of tool, shown as
// title) may run: allow or reject, once or always.
func NewPermissionRequest(sessionID, id, tool, title string, kind ToolKind, input json.RawMessage) PermissionRequest {
	return PermissionRequest{
		SessionID: sessionID,
		ToolCall:  ToolCallUpdate{ToolCallID: id, Title: title, Name: tool, Kind: kind, Status: StatusPending, RawInput: input},
		Options: []PermissionOption{
			{Kind: AllowOnce, Name: "Allow", OptionID: AllowOnce},
			{Kind: AllowAlways, Name: "Always allow " + tool, OptionID: AllowAlways},
			{Kind: RejectOnce, Name: "Reject", OptionID: RejectOnce},
			{Kind: RejectAlways, Name: "Always reject " + tool, OptionID: RejectAlways},
		},
	}
}

// PermissionResponse is the client's answer to session/request_permission.
type PermissionResponse struct {
	Outcome struct {
		Outcome  string `json:"outcome"`
		OptionID string `json:"optionId"`
	} `json:"outcome"`
}

// ReadTextFileParams is fs/read_text_file's params; a zero line or limit
// is left out.
type ReadTextFileParams struct {
	SessionID string `json:"sessionId"`
	Path      string `json:"path"`
	Line      int    `json:"line,omitempty"`
	Limit     int    `json:"limit,omitempty"`
}

// ReadTextFileResult is the client's answer to fs/read_text_file.
type ReadTextFileResult struct {
	Content string `json:"content"`
}

// WriteTextFileParams is fs/write_text_file's params.
type WriteTextFileParams struct {
	SessionID string `json:"sessionId"`
	Path      string `json:"path"`
	Content   string `json:"content"`
}

// CreateTerminalParams is terminal/create's params (members in name order).
type CreateTerminalParams struct {
	Args            []string `json:"args"`
	Command         string   `json:"command"`
	Cwd             string   `json:"cwd"`
	OutputByteLimit int      `json:"outputByteLimit"`
	SessionID       string   `json:"sessionId"`
}

// TerminalParams names a client terminal: the params of terminal/output,
// wait_for_exit, kill and release.
type TerminalParams struct {
	SessionID  string `json:"sessionId"`
	TerminalID string `json:"terminalId"`
}

// The sign-in methods acpbridge offers.
const (
	AuthMethodKey   = "api-key" // the key acpbridge has: OPENAI_API_KEY, or the stored one
	AuthMethodSetup = "setup"   // acpbridge setup, run by the client in a terminal
)

// AgentAuthMethods are acpbridge's ways to sign in: the key it has always,
// and acpbridge setup in a terminal to a client that can run one.
func AgentAuthMethods(terminal bool) []AuthMethod {
	methods := []AuthMethod{{ID: AuthMethodKey, Name: "API key",
		Description: "Use the key acpbridge has: OPENAI_API_KEY in its environment, or the one stored by acpbridge setup"}}
	if terminal {
		methods = append(methods, AuthMethod{Type: "terminal", ID: AuthMethodSetup, Name: "Sign in",
			Description: "Choose the endpoint (OpenAI, Ollama, OpenRouter, any OpenAI-compatible one), enter the key and pick the model; stored for acpbridge, readable by you only",
			Args:        []string{"setup"}})
	}
	return methods
}

// AgentInitializeResult is acpbridge's answer to initialize: what it
// offers, the same in every process of a version (--fanout's router
// answers with it for its children); a terminal sign-in only to a client
// that can run one.
func AgentInitializeResult(version string, client ClientCapabilities) InitializeResult {
	return InitializeResult{
		ProtocolVersion: ProtocolVersion,
		AgentCapabilities: AgentCapabilities{
			LoadSession:        true,
			PromptCapabilities: PromptCapabilities{Image: true, EmbeddedContext: true},
			McpCapabilities:    McpCapabilities{HTTP: true, SSE: true},
			SessionCapabilities: SessionCapabilities{
				Close:                 Supported,
				List:                  Supported,
				Resume:                Supported,
				Delete:                Supported,
				AdditionalDirectories: Supported,
				SystemPrompt:          &SystemPromptCapabilities{Mode: SystemPromptModes{Override: Supported}},
			},
			Auth: AgentAuth{Logout: Supported},
		},
		AuthMethods: AgentAuthMethods(client.TerminalAuth()),
		AgentInfo:   Implementation{Name: "acpbridge", Title: "acpbridge", Version: version},
	}
}

// Response is a JSON-RPC response whose result or error is encoded already
// (--fanout passes them between the client and its children).
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}
