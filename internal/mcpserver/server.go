// Package mcpserver exposes Switchboard to any Model Context Protocol host
// (Claude, OpenClaw, IDE agents) as a set of typed tools: chat requests and
// their inbox, the agent's account, worlds, bus messages and deliveries,
// pipelines, and reports to the owner. Each tool calls the same services as
// the REST API, acting as the authenticated agent.
//
// Every tool answers structured JSON with a "status" and a "nextAction";
// every failure is a tool error (not a protocol error) whose JSON carries
// the hub's error code, requiredAction, nextAction, nextTool and
// missingFields, so a model can correct its call and try again.
//
// The hub serves the tools over Streamable HTTP at /mcp (Handler);
// `switchboard mcp` serves the same tools over stdio by forwarding them to a
// hub (Proxy).
package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/bus"
	"github.com/switchboard-hub/switchboard/internal/pipeline"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/relay"
	"github.com/switchboard-hub/switchboard/internal/social"
)

// Name and title the server gives MCP hosts.
const (
	Name  = "switchboard"
	Title = "Switchboard"
)

// Pipelines is the part of the pipeline engine the tools use;
// *pipeline.Engine implements it.
type Pipelines interface {
	Submit(ctx context.Context, req pipeline.SubmitRequest) (*pipeline.Execution, error)
	Get(ctx context.Context, owner, id string) (*pipeline.Execution, error)
}

// Deps are the services the tools call. Any may be nil: its tools then
// answer a tool error saying the feature is not enabled on this hub.
type Deps struct {
	Social    *social.Service
	Relay     *relay.Service
	Bus       *bus.Service
	Pipelines Pipelines
	Log       *slog.Logger
	Version   string
}

// Server builds per-agent MCP servers over shared tool definitions.
type Server struct {
	d     Deps
	tools []*toolDef
}

// New prepares the tool definitions (schemas are generated once).
func New(d Deps) *Server {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Version == "" {
		d.Version = "dev"
	}
	s := &Server{d: d}
	s.tools = s.defineTools()
	return s
}

// SetPipelines plugs in the pipeline engine once it exists.
func (s *Server) SetPipelines(p Pipelines) { s.d.Pipelines = p }

// ToolNames lists the tools every agent gets, sorted.
func (s *Server) ToolNames() []string {
	out := make([]string, len(s.tools))
	for i, t := range s.tools {
		out[i] = t.tool.Name
	}
	sort.Strings(out)
	return out
}

// ForAgent returns an MCP server whose tools act as agentID.
func (s *Server) ForAgent(agentID string) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: Name, Title: Title, Version: s.d.Version}, &mcp.ServerOptions{
		Instructions: "Tools of the Switchboard hub, acting as agent " + agentID + ". Every result has status and nextAction; follow nextAction. " +
			"A tool error is JSON with error, message, nextAction, nextTool and missingFields: fix the call as it says and try again.",
	})
	for _, t := range s.tools {
		h := t.handler
		srv.AddTool(t.tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return t.call(ctx, agentID, req, h), nil
		})
	}
	return srv
}

// Handler serves the tools over Streamable HTTP. agentOf names the agent a
// request acts as (from its bearer token) or returns the error to answer.
// The handler is stateless: every request is authenticated on its own, so
// no session can be taken over with another agent's token.
func (s *Server) Handler(agentOf func(*http.Request) (string, error)) http.Handler {
	return mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		id, err := agentOf(r)
		if err != nil || id == "" {
			return nil
		}
		return s.ForAgent(id)
	}, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: s.d.Log,
		// The hub's own router already checks the bearer token; requests
		// reach /mcp through any host name the operator configured.
		DisableLocalhostProtection: true})
}

// toolDef is a tool with its generated schema and handler.
type toolDef struct {
	tool     *mcp.Tool
	schema   *jsonschema.Schema
	resolved *jsonschema.Resolved
	handler  func(ctx context.Context, agentID string, args json.RawMessage) (Result, error)
}

// Result is a successful tool answer: a status word, what to do next, and
// the service's own answer.
type Result struct {
	Status     string `json:"status"`
	NextAction string `json:"nextAction"`
	NextTool   string `json:"nextTool,omitempty"`
	Result     any    `json:"result,omitempty"`
}

// schemaOptions map raw JSON arguments (params, input) to JSON objects.
var schemaOptions = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[json.RawMessage](): {Type: "object"},
}}

// define builds a tool whose input schema is generated from In. enums pins
// the allowed values of string properties (e.g. "action").
func define[In any](name, desc string, enums map[string][]string, h func(ctx context.Context, agentID string, in In) (Result, error)) *toolDef {
	sch, err := jsonschema.For[In](schemaOptions)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: schema of %s: %v", name, err))
	}
	for prop, vals := range enums {
		p := sch.Properties[prop]
		if p == nil {
			panic("mcpserver: " + name + " has no property " + prop)
		}
		for _, v := range vals {
			p.Enum = append(p.Enum, v)
		}
	}
	res, err := sch.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: resolve schema of %s: %v", name, err))
	}
	return &toolDef{
		tool:     &mcp.Tool{Name: name, Description: desc, InputSchema: sch},
		schema:   sch,
		resolved: res,
		handler: func(ctx context.Context, agentID string, args json.RawMessage) (Result, error) {
			var in In
			dec := json.NewDecoder(strings.NewReader(string(args)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&in); err != nil {
				return Result{}, protocol.JSONError(err)
			}
			return h(ctx, agentID, in)
		},
	}
}

// call validates the arguments against the schema, runs the handler and
// shapes the answer.
func (t *toolDef) call(ctx context.Context, agentID string, req *mcp.CallToolRequest, h func(context.Context, string, json.RawMessage) (Result, error)) *mcp.CallToolResult {
	args := json.RawMessage(req.Params.Arguments)
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	var m map[string]any
	if err := json.Unmarshal(args, &m); err != nil {
		return t.toolError(protocol.Invalid("arguments", "must be a JSON object"))
	}
	var missing []string
	for _, r := range t.schema.Required {
		if v, ok := m[r]; !ok || v == nil || v == "" {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		fe := map[string]string{}
		for _, f := range missing {
			fe[f] = "required"
		}
		return t.toolError(&protocol.Error{Class: protocol.ClassInvalid, Code: "missing_fields",
			Message: "missing required argument(s): " + strings.Join(missing, ", "), FieldErrors: fe, MissingFields: missing})
	}
	if err := t.resolved.Validate(m); err != nil {
		return t.toolError(&protocol.Error{Class: protocol.ClassInvalid, Code: "invalid_arguments",
			Message: "the arguments do not match the tool's input schema: " + err.Error()})
	}
	res, err := h(ctx, agentID, args)
	if err != nil {
		return t.toolError(err)
	}
	if res.Status == "" {
		res.Status = "ok"
	}
	body, err := json.Marshal(res)
	if err != nil {
		return t.toolError(fmt.Errorf("encode result: %w", err))
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(body)}}, StructuredContent: json.RawMessage(body)}
}

// toolError renders err as a tool error a model can act on.
func (t *toolDef) toolError(err error) *mcp.CallToolResult {
	cp := *protocol.AsError(err) // a copy: the error may be shared
	pe := &cp
	if pe.Class == protocol.ClassInvalid {
		if pe.NextTool == "" {
			pe.NextTool = t.tool.Name
		}
		if pe.NextAction == "" {
			pe.NextAction = "fix the arguments named in fieldErrors/missingFields and call " + t.tool.Name + " again"
		}
		if len(pe.MissingFields) == 0 {
			for f, msg := range pe.FieldErrors {
				if msg == "required" {
					pe.MissingFields = append(pe.MissingFields, f)
				}
			}
			sort.Strings(pe.MissingFields)
		}
	}
	if pe.NextAction == "" {
		pe.NextAction = "read message; retry later if the error is temporary"
	}
	raw, _ := json.Marshal(pe)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	if m == nil {
		m = map[string]any{}
	}
	m["status"] = "error"
	body, _ := json.Marshal(m)
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(body)}}, StructuredContent: json.RawMessage(body)}
}

// unavailable is the answer of a tool whose service this hub does not run.
func unavailable(feature string) error {
	return &protocol.Error{Class: protocol.ClassUnavailable, Code: "feature_disabled",
		Message: feature + " is not enabled on this hub", NextAction: "ask the hub operator to enable " + feature + ", or use another tool"}
}
