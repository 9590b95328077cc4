package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// WriteJSON writes v as a JSON response with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, err := w.Write(buf.Bytes())
	return err
}

// WriteError renders err as the structured error body with its HTTP status.
// Errors that are not *protocol.Error become E006 without leaking details.
func WriteError(w http.ResponseWriter, r *http.Request, err error, requestID string) {
	pe := protocol.AsError(err)
	status := pe.HTTPStatus()
	body := *pe
	body.Extra = make(map[string]any, len(pe.Extra)+1)
	for k, v := range pe.Extra {
		body.Extra[k] = v
	}
	if requestID != "" {
		body.Extra["requestId"] = requestID
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="switchboard"`)
	}
	_ = WriteJSON(w, status, &body)
}

// Decode reads a JSON object body into v strictly: unknown fields, trailing
// data, wrong types, non-JSON content types and oversize bodies are E003
// errors naming the problem. Use it where a misspelled field would silently
// change meaning.
func Decode(r *http.Request, v any) error { return decode(r, v, true) }

// DecodeLoose is Decode without the unknown-field check, for wire-compatible
// endpoints whose existing clients send extra members.
func DecodeLoose(r *http.Request, v any) error { return decode(r, v, false) }

func decode(r *http.Request, v any, strict bool) error {
	body, err := ReadJSONBody(r)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return protocol.JSONError(err)
	}
	if dec.More() {
		return protocol.Invalid("", "unexpected data after the JSON object")
	}
	return nil
}

// ReadJSONBody is ReadBody for endpoints that take JSON they parse
// themselves: a body declared as anything but JSON is refused with 415
// before it is read, as Decode does.
func ReadJSONBody(r *http.Request) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && mt != "text/plain") {
			return nil, &protocol.Error{Class: protocol.ClassInvalid, Code: "unsupported_media_type", Status: http.StatusUnsupportedMediaType,
				Message: "the body must be JSON (Content-Type: application/json), got " + ct, NextAction: "send the body as JSON with Content-Type: application/json"}
		}
	}
	return ReadBody(r)
}

// ReadBody reads the raw body under the route's size limit.
func ReadBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &protocol.Error{Class: protocol.ClassInvalid, Code: "body_too_large", Status: http.StatusRequestEntityTooLarge,
				Message: fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), NextAction: "send a smaller body"}
		}
		return nil, protocol.Errorf(protocol.ClassInvalid, "body_unreadable", "could not read the request body: %v", err)
	}
	return body, nil
}

// QueryInt parses an integer query parameter within [min, max], with a default.
func QueryInt(r *http.Request, name string, def, min, max int) (int, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < min || n > max {
		return 0, protocol.Invalid(name, fmt.Sprintf("must be an integer between %d and %d", min, max))
	}
	return n, nil
}

// QueryBool parses a boolean query parameter.
func QueryBool(r *http.Request, name string) (bool, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, protocol.Invalid(name, "must be true or false")
	}
	return b, nil
}

// decodeOptional decodes a strict JSON body when there is one (an empty
// body leaves v as it is).
func decodeOptional(r *http.Request, v any) error { return decodeMaybe(r, v, true) }

// decodeOptionalLoose is decodeOptional tolerating unknown members, for
// wire-compatible endpoints whose clients may send none or extra fields.
func decodeOptionalLoose(r *http.Request, v any) error { return decodeMaybe(r, v, false) }

func decodeMaybe(r *http.Request, v any, strict bool) error {
	body, err := ReadBody(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return decode(r, v, strict)
}
