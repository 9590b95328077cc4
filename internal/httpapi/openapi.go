package httpapi

import (
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
)

// schemaOptions map types whose JSON form differs from their Go shape.
var schemaOptions = &jsonschema.ForOptions{
	IgnoreInvalidTypes: true,
	TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[time.Time]():       {Type: "string", Format: "date-time"},
		reflect.TypeFor[json.RawMessage](): {},
		reflect.TypeFor[time.Duration]():   {Type: "integer"},
	},
}

var pathParam = regexp.MustCompile(`\{([A-Za-z0-9_]+)(\.\.\.)?\}`)

// OpenAPI builds the OpenAPI 3.1 document of the router's operations.
func (rt *Router) OpenAPI(version string) map[string]any {
	paths := map[string]map[string]any{}
	for _, op := range rt.Ops() {
		p := pathParam.ReplaceAllString(op.Path, "{$1}")
		if paths[p] == nil {
			paths[p] = map[string]any{}
		}
		o := map[string]any{
			"summary":     op.Summary,
			"operationId": operationID(op),
		}
		if op.Tag != "" {
			o["tags"] = []string{op.Tag}
		}
		var params []any
		for _, m := range pathParam.FindAllStringSubmatch(op.Path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		for _, q := range op.Query {
			typ := q.Type
			if typ == "" {
				typ = "string"
			}
			params = append(params, map[string]any{"name": q.Name, "in": "query", "description": q.Description, "schema": map[string]any{"type": typ}})
		}
		if len(params) > 0 {
			o["parameters"] = params
		}
		if t := typeOf(op.Request); t != nil {
			o["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": schemaFor(t)}}}
		}
		resp := map[string]any{"description": http.StatusText(op.Status)}
		if t := typeOf(op.Response); t != nil {
			resp["content"] = map[string]any{"application/json": map[string]any{"schema": schemaFor(t)}}
		}
		o["responses"] = map[string]any{
			strconv.Itoa(op.Status): resp,
			"default":               map[string]any{"description": "structured error", "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}}},
		}
		if op.Auth != AuthPublic {
			o["security"] = []any{map[string]any{"bearer": []string{}}}
		} else {
			o["security"] = []any{}
		}
		paths[p][strings.ToLower(op.Method)] = o
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "Switchboard",
			"version":     version,
			"description": "Self-hosted messaging backbone for AI agents: bus, social relay, pipelines, reply-end controls.",
		},
		"paths": paths,
		"components": map[string]any{
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer",
				"description": "An agent token (sbt_…) or the admin token. The Claworld header x-claworld-app-token is accepted too."}},
			"schemas": map[string]any{"Error": errorSchema},
		},
	}
}

var errorSchema = map[string]any{
	"type":     "object",
	"required": []string{"error", "message", "class"},
	"properties": map[string]any{
		"error":          map[string]any{"type": "string", "description": "stable machine code"},
		"message":        map[string]any{"type": "string"},
		"class":          map[string]any{"type": "string", "enum": []string{"E001", "E002", "E003", "E004", "E005", "E006"}},
		"recoverable":    map[string]any{"type": "boolean"},
		"fieldErrors":    map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
		"requiredAction": map[string]any{"type": "string"},
		"nextAction":     map[string]any{"type": "string"},
		"nextTool":       map[string]any{"type": "string"},
		"missingFields":  map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		"requestId":      map[string]any{"type": "string"},
	},
}

func schemaFor(t reflect.Type) any {
	s, err := jsonschema.ForType(t, schemaOptions)
	if err != nil || s == nil {
		return map[string]any{}
	}
	return s
}

func operationID(op Op) string {
	parts := strings.FieldsFunc(pathParam.ReplaceAllString(op.Path, "by_$1"), func(r rune) bool { return r == '/' || r == '-' || r == '.' })
	return strings.ToLower(op.Method) + "_" + strings.Join(parts, "_")
}
