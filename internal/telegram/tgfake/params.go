package tgfake

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// apiError is a Bot API failure: the HTTP status equals error_code, as on
// api.telegram.org.
type apiError struct {
	code       int
	desc       string
	retryAfter int
}

func (e *apiError) Error() string { return e.desc }

func errBadRequest(desc string) *apiError {
	return &apiError{code: http.StatusBadRequest, desc: "Bad Request: " + desc}
}

// The error descriptions the fake shares with Telegram, byte for byte.
const (
	descNotModified   = "message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"
	descEditNotFound  = "message to edit not found"
	descTooLong       = "message is too long"
	descTextEmpty     = "message text is empty"
	descQueryTooOld   = "query is too old and response timeout expired or query ID is invalid"
	descButtonData    = "BUTTON_DATA_INVALID"
	descChatNotFound  = "chat not found"
	descThreadMissing = "message thread not found"
	descBizNotFound   = "business connection not found"
	descMarkupJSON    = "can't parse reply keyboard markup JSON object"
	descWebhookActive = "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"
	descTerminated    = "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"
	descAnswerTooLong = "MESSAGE_TOO_LONG"
	descSecretToken   = "secret token contains unallowed characters"
)

// params holds a request's parameters the way the Bot API sees them: every
// value is a string, and structured values (reply_markup, allowed_updates)
// are JSON text, whether they arrived in a JSON body, a urlencoded form, a
// multipart form or the query string.
type params map[string]string

// maxBody bounds request bodies; real text requests are far smaller.
const maxBody = 8 << 20

// readParams decodes a request's parameters from the query string and the
// body. Body values win over query values, as they do on Telegram's server.
func readParams(r *http.Request) (params, *apiError) {
	p := params{}
	for k, v := range r.URL.Query() {
		if len(v) > 0 {
			p[k] = v[0]
		}
	}
	if r.Body == nil {
		return p, nil
	}
	ct := r.Header.Get("Content-Type")
	mt, mtParams, _ := mime.ParseMediaType(ct)
	boundary := mtParams["boundary"]
	switch mt {
	case "application/json":
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
		if err != nil {
			return nil, errBadRequest("can't read request body")
		}
		if len(bytes.TrimSpace(body)) == 0 {
			return p, nil
		}
		if err := decodeJSONParams(body, p); err != nil {
			return nil, err
		}
	case "application/x-www-form-urlencoded":
		r.Body = http.MaxBytesReader(nil, r.Body, maxBody)
		if err := r.ParseForm(); err != nil {
			return nil, errBadRequest("can't parse request body")
		}
		for k, v := range r.PostForm {
			if len(v) > 0 {
				p[k] = v[0]
			}
		}
	case "multipart/form-data":
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
		if err != nil {
			return nil, errBadRequest("can't read request body")
		}
		if len(body) == 0 {
			// clients send an empty multipart body for methods without parameters
			break
		}
		form, err := multipart.NewReader(bytes.NewReader(body), boundary).ReadForm(maxBody)
		if err != nil {
			return nil, errBadRequest("can't parse request body")
		}
		for k, v := range form.Value {
			if len(v) > 0 {
				p[k] = v[0]
			}
		}
		_ = form.RemoveAll()
	}
	for k, v := range p {
		if !utf8.ValidString(v) || !utf8.ValidString(k) {
			return nil, errBadRequest("strings must be encoded in UTF-8")
		}
	}
	return p, nil
}

// decodeJSONParams flattens a JSON object body into params: strings stay
// strings, scalars become their literal text, objects and arrays stay JSON.
func decodeJSONParams(body []byte, p params) *apiError {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return errBadRequest("can't parse JSON object")
	}
	for k, raw := range obj {
		raw = bytes.TrimSpace(raw)
		switch {
		case len(raw) == 0 || string(raw) == "null":
			continue
		case raw[0] == '"':
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return errBadRequest("can't parse JSON object")
			}
			p[k] = s
		default:
			p[k] = string(raw)
		}
	}
	return nil
}

func (p params) has(name string) bool {
	_, ok := p[name]
	return ok
}

// str returns a string parameter ("" when absent).
func (p params) str(name string) string { return p[name] }

// int64 returns an integer parameter; absent parameters are zero.
func (p params) int64(name string) (int64, *apiError) {
	v, ok := p[name]
	if !ok || v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, errBadRequest("invalid " + name + " specified")
	}
	return n, nil
}

// bool returns a Boolean parameter: "true"/"1" are true, "false"/"0"/absent false.
func (p params) bool(name string) (bool, *apiError) {
	switch strings.ToLower(strings.TrimSpace(p[name])) {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	}
	return false, errBadRequest("invalid " + name + " specified")
}

// stringList returns a JSON array of strings (allowed_updates); present
// reports whether the parameter was given at all.
func (p params) stringList(name string) (list []string, present bool, err *apiError) {
	v, ok := p[name]
	if !ok {
		return nil, false, nil
	}
	if strings.TrimSpace(v) == "" {
		return []string{}, true, nil
	}
	if e := json.Unmarshal([]byte(v), &list); e != nil {
		return nil, true, errBadRequest("can't parse " + name + " JSON array")
	}
	return list, true, nil
}

// Button is one inline keyboard button as the fake stores it. Exactly one
// action is set: CallbackData, URL, Disabled, or Other (any other Bot API
// action, kept by name so that keyboards still compare exactly).
type Button struct {
	Text         string
	CallbackData string
	URL          string
	Disabled     bool
	Style        string
	Other        string
}

// Keyboard is an inline keyboard, rows of buttons. A nil or empty keyboard
// means the message has none.
type Keyboard [][]Button

func (k Keyboard) empty() bool {
	for _, row := range k {
		if len(row) > 0 {
			return false
		}
	}
	return true
}

// equal compares keyboards the way Telegram decides "not modified".
func (k Keyboard) equal(o Keyboard) bool {
	if k.empty() || o.empty() {
		return k.empty() && o.empty()
	}
	if len(k) != len(o) {
		return false
	}
	for i := range k {
		if len(k[i]) != len(o[i]) {
			return false
		}
		for j := range k[i] {
			if k[i][j] != o[i][j] {
				return false
			}
		}
	}
	return true
}

// otherActions are inline button actions the fake accepts but never acts on.
var otherActions = []string{"web_app", "login_url", "switch_inline_query", "switch_inline_query_current_chat",
	"switch_inline_query_chosen_chat", "copy_text", "callback_game", "pay"}

// parseReplyMarkup validates reply_markup as Telegram does and returns the
// inline keyboard it carries (nil for no keyboard). inlineOnly is set for
// edit methods, which accept inline keyboards only.
func parseReplyMarkup(raw string, inlineOnly bool) (Keyboard, *apiError) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &obj); err != nil || obj == nil {
		return nil, errBadRequest(descMarkupJSON)
	}
	rowsRaw, ok := obj["inline_keyboard"]
	if !ok {
		if inlineOnly {
			return nil, errBadRequest("inline keyboard expected")
		}
		// reply keyboards, keyboard removal and force_reply live in the
		// client; the fake records no inline keyboard for them.
		return nil, nil
	}
	var rows []json.RawMessage
	if err := json.Unmarshal(rowsRaw, &rows); err != nil {
		return nil, errBadRequest("Field \"inline_keyboard\" of the InlineKeyboardMarkup should be an Array of Arrays")
	}
	kb := make(Keyboard, 0, len(rows))
	for _, rowRaw := range rows {
		var buttons []json.RawMessage
		if err := json.Unmarshal(rowRaw, &buttons); err != nil {
			return nil, errBadRequest("Field \"inline_keyboard\" of the InlineKeyboardMarkup should be an Array of Arrays")
		}
		row := make([]Button, 0, len(buttons))
		for _, bRaw := range buttons {
			b, err := parseButton(bRaw)
			if err != nil {
				return nil, err
			}
			row = append(row, b)
		}
		kb = append(kb, row)
	}
	if kb.empty() {
		return nil, nil
	}
	return kb, nil
}

func parseButton(raw json.RawMessage) (Button, *apiError) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return Button{}, errBadRequest("can't parse inline keyboard button: InlineKeyboardButton should be an Object")
	}
	var b Button
	textRaw, ok := fields["text"]
	if !ok || json.Unmarshal(textRaw, &b.Text) != nil {
		return Button{}, errBadRequest("can't parse inline keyboard button: Field \"text\" must be of type String")
	}
	if s, ok := fields["style"]; ok {
		_ = json.Unmarshal(s, &b.Style)
	}
	actions := 0
	if d, ok := fields["callback_data"]; ok {
		actions++
		if json.Unmarshal(d, &b.CallbackData) != nil || len(b.CallbackData) == 0 || len(b.CallbackData) > 64 {
			return Button{}, errBadRequest(descButtonData)
		}
	}
	if u, ok := fields["url"]; ok {
		actions++
		if json.Unmarshal(u, &b.URL) != nil || b.URL == "" {
			return Button{}, errBadRequest("can't parse inline keyboard button: Field \"url\" must be of type String")
		}
	}
	if _, ok := fields["disabled"]; ok {
		actions++
		b.Disabled = true
	}
	for _, name := range otherActions {
		if v, ok := fields[name]; ok {
			if name == "pay" && string(v) == "false" {
				continue
			}
			actions++
			b.Other = name
		}
	}
	if actions == 0 {
		return Button{}, errBadRequest("can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard")
	}
	if actions > 1 {
		return Button{}, errBadRequest("can't parse inline keyboard button: exactly one of the optional fields must be used")
	}
	return b, nil
}
