// schema_test.go validates every message the agent writes in the tests
// against the official ACP v1 schema in testdata/acp/schema.json (its
// source is in testdata/acp/SOURCE.md):
// the whole message against the Agent envelope, and its params or result
// against the exact type its method calls for.

package main

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"acpbridge/internal/acp"
)

const schemaPath = "testdata/acp/schema.json"

var (
	schemaOnce sync.Once
	schemas    map[string]*jsonschema.Schema // "" is the Agent envelope; else a $defs name
	schemaErr  error
)

// Types of the results of client → agent methods.
var resultDefs = map[string]string{
	acp.MethodInitialize:             "InitializeResponse",
	acp.MethodAuthenticate:           "AuthenticateResponse",
	acp.MethodLogout:                 "LogoutResponse",
	acp.MethodSessionNew:             "NewSessionResponse",
	acp.MethodSessionLoad:            "LoadSessionResponse",
	acp.MethodSessionResume:          "ResumeSessionResponse",
	acp.MethodSessionList:            "ListSessionsResponse",
	acp.MethodSessionDelete:          "DeleteSessionResponse",
	acp.MethodSessionClose:           "CloseSessionResponse",
	acp.MethodSessionPrompt:          "PromptResponse",
	acp.MethodSessionSetMode:         "SetSessionModeResponse",
	acp.MethodSessionSetConfigOption: "SetSessionConfigOptionResponse",
}

// Types of the params of agent → client messages.
var paramDefs = map[string]string{
	acp.MethodSessionUpdate:     "SessionNotification",
	acp.MethodRequestPermission: "RequestPermissionRequest",
	acp.MethodFSRead:            "ReadTextFileRequest",
	acp.MethodFSWrite:           "WriteTextFileRequest",
	acp.MethodTerminalCreate:    "CreateTerminalRequest",
	acp.MethodTerminalOutput:    "TerminalOutputRequest",
	acp.MethodTerminalWait:      "WaitForTerminalExitRequest",
	acp.MethodTerminalKill:      "KillTerminalRequest",
	acp.MethodTerminalRelease:   "ReleaseTerminalRequest",
	acp.MethodCancelRequest:     "CancelRequestNotification",
}

func loadSchemas() (map[string]*jsonschema.Schema, error) {
	schemaOnce.Do(func() {
		b, err := os.ReadFile(schemaPath)
		if err != nil {
			schemaErr = err
			return
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			schemaErr = err
			return
		}
		c := jsonschema.NewCompiler()
		const url = "file:///acp/schema.json"
		if err := c.AddResource(url, doc); err != nil {
			schemaErr = err
			return
		}
		schemas = map[string]*jsonschema.Schema{}
		compile := func(key, ptr string) {
			if schemaErr != nil {
				return
			}
			schemas[key], schemaErr = c.Compile(url + "#" + ptr)
		}
		compile("", "/anyOf/0")
		compile("Error", "/$defs/Error")
		for _, def := range resultDefs {
			compile(def, "/$defs/"+def)
		}
		for _, def := range paramDefs {
			compile(def, "/$defs/"+def)
		}
	})
	return schemas, schemaErr
}

// schemaChecker validates the agent's lines of one connection.
type schemaChecker struct {
	t       testing.TB
	schemas map[string]*jsonschema.Schema
	mu      sync.Mutex
	methods map[string]string // the client's request ids (JSON text) → method
}

func newSchemaChecker(t testing.TB) *schemaChecker {
	s, err := loadSchemas()
	if err != nil {
		t.Fatalf("cannot validate the agent's messages against the ACP schema: %v", err)
	}
	return &schemaChecker{t: t, schemas: s, methods: map[string]string{}}
}

// sent records a client line so that its response can be typed.
func (c *schemaChecker) sent(line []byte) {
	m, ok := decodeLoose(line)
	if !ok {
		return
	}
	method, _ := m["method"].(string)
	if id, ok := m["id"]; ok && method != "" {
		c.mu.Lock()
		c.methods[fmt.Sprint(id)] = method
		c.mu.Unlock()
	}
}

// check validates one agent line and returns what is wrong, or "".
func (c *schemaChecker) check(line []byte) string {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
	if err != nil {
		return fmt.Sprintf("not JSON: %v", err)
	}
	if err := c.schemas[""].Validate(inst); err != nil {
		return fmt.Sprintf("not an ACP agent message: %v", err)
	}
	m := inst.(map[string]any)
	method, _ := m["method"].(string)
	var def string
	var part any
	switch {
	case method != "":
		def, part = paramDefs[method], m["params"]
		if def == "" {
			return fmt.Sprintf("the agent sent method %q, which the schema does not give it", method)
		}
	case m["error"] != nil:
		def, part = "Error", m["error"]
	default:
		c.mu.Lock()
		req := c.methods[fmt.Sprint(m["id"])]
		delete(c.methods, fmt.Sprint(m["id"]))
		c.mu.Unlock()
		def, part = resultDefs[req], m["result"]
		if def == "" {
			return ""
		}
	}
	if err := c.schemas[def].Validate(part); err != nil {
		return fmt.Sprintf("not a valid %s: %v", def, err)
	}
	return ""
}
