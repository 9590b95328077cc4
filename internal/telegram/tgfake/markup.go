package tgfake

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// utf16Len is how Telegram measures text: in UTF-16 code units, so a
// character outside the Basic Multilingual Plane (most emoji) counts twice.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// parseText applies a parse mode the way the Bot API does before it stores a
// message: it returns the visible text (markup removed, escapes resolved) or
// the "can't parse entities" error Telegram would answer. The parsers are
// deliberately strict: a chunk with an unclosed tag or an unescaped reserved
// character fails here exactly as it would in production.
func parseText(text, mode string) (string, error) {
	switch mode {
	case "":
		return text, nil
	case "HTML", "html":
		return parseHTML(text)
	case "MarkdownV2", "markdownv2":
		return parseMarkdownV2(text)
	case "Markdown", "markdown":
		return parseMarkdownV1(text)
	default:
		return "", errBadRequest("unsupported parse_mode")
	}
}

func entitiesError(format string, args ...any) error {
	return errBadRequest("can't parse entities: " + fmt.Sprintf(format, args...))
}

// htmlTags are the tags the Bot API accepts in HTML parse mode.
var htmlTags = map[string]bool{
	"b": true, "strong": true, "i": true, "em": true, "u": true, "ins": true,
	"s": true, "strike": true, "del": true, "span": true, "tg-spoiler": true,
	"a": true, "code": true, "pre": true, "blockquote": true, "tg-emoji": true,
}

func parseHTML(text string) (string, error) {
	type open struct {
		name   string
		offset int
	}
	var (
		stack []open
		out   strings.Builder
	)
	for i := 0; i < len(text); {
		c := text[i]
		switch c {
		case '<':
			end := strings.IndexByte(text[i:], '>')
			if end < 0 {
				return "", entitiesError("Unclosed start tag at byte offset %d", i)
			}
			tag := text[i+1 : i+end]
			if strings.HasPrefix(tag, "/") {
				name := strings.ToLower(strings.TrimSpace(tag[1:]))
				if len(stack) == 0 {
					return "", entitiesError("Unexpected end tag at byte offset %d", i)
				}
				top := stack[len(stack)-1]
				if name != "" && name != top.name {
					return "", entitiesError("Unmatched end tag at byte offset %d, expected \"</%s>\", found \"</%s>\"", i, top.name, name)
				}
				stack = stack[:len(stack)-1]
			} else {
				name := tag
				if sp := strings.IndexAny(name, " \t\n"); sp >= 0 {
					name = name[:sp]
				}
				name = strings.ToLower(name)
				if !htmlTags[name] {
					return "", entitiesError("Unsupported start tag \"%s\" at byte offset %d", name, i)
				}
				if name == "span" && !strings.Contains(tag, "tg-spoiler") {
					return "", entitiesError("Tag \"span\" must have class \"tg-spoiler\" at byte offset %d", i)
				}
				stack = append(stack, open{name: name, offset: i})
			}
			i += end + 1
		case '&':
			semi := strings.IndexByte(text[i:min(len(text), i+12)], ';')
			if semi > 1 && semi <= 10 {
				if r, ok := htmlEntity(text[i+1 : i+semi]); ok {
					out.WriteRune(r)
					i += semi + 1
					continue
				}
			}
			out.WriteByte('&')
			i++
		default:
			_, size := utf8.DecodeRuneInString(text[i:])
			out.WriteString(text[i : i+size])
			i += size
		}
	}
	if len(stack) > 0 {
		top := stack[len(stack)-1]
		return "", entitiesError("Can't find end tag corresponding to start tag \"%s\"", top.name)
	}
	return out.String(), nil
}

// htmlEntity decodes the entities the Bot API supports: the four named ones
// and numeric references.
func htmlEntity(name string) (rune, bool) {
	switch name {
	case "lt":
		return '<', true
	case "gt":
		return '>', true
	case "amp":
		return '&', true
	case "quot":
		return '"', true
	}
	if strings.HasPrefix(name, "#x") || strings.HasPrefix(name, "#X") {
		v, err := strconv.ParseUint(name[2:], 16, 32)
		return rune(v), err == nil && utf8.ValidRune(rune(v))
	}
	if strings.HasPrefix(name, "#") {
		v, err := strconv.ParseUint(name[1:], 10, 32)
		return rune(v), err == nil && utf8.ValidRune(rune(v))
	}
	return 0, false
}

// mdV2Reserved are the characters MarkdownV2 requires to be escaped outside
// entities.
const mdV2Reserved = "_*[]()~`>#+-=|{}.!"

func parseMarkdownV2(text string) (string, error) {
	type open struct {
		kind   string
		offset int
	}
	var (
		stack     []open
		out       strings.Builder
		lineStart = true
	)
	isOpen := func(kind string) int {
		for i := len(stack) - 1; i >= 0; i-- {
			if stack[i].kind == kind {
				return i
			}
		}
		return -1
	}
	toggle := func(kind string, at int) error {
		if idx := isOpen(kind); idx >= 0 {
			if idx != len(stack)-1 {
				return entitiesError("Can't find end of %s entity at byte offset %d", stack[len(stack)-1].kind, stack[len(stack)-1].offset)
			}
			stack = stack[:idx]
			return nil
		}
		stack = append(stack, open{kind: kind, offset: at})
		return nil
	}
	top := func() string {
		if len(stack) == 0 {
			return ""
		}
		return stack[len(stack)-1].kind
	}
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		wasLineStart := lineStart
		lineStart = r == '\n'
		if r == '\\' {
			if i+1 >= len(text) {
				return "", entitiesError("Character '\\' is reserved and must be escaped with the preceding '\\'")
			}
			nr, nsize := utf8.DecodeRuneInString(text[i+1:])
			if nr < 1 || nr > 126 {
				return "", entitiesError("Character '\\' is reserved and must be escaped with the preceding '\\'")
			}
			out.WriteRune(nr)
			i += 1 + nsize
			continue
		}
		switch top() {
		case "Pre":
			if strings.HasPrefix(text[i:], "```") {
				stack = stack[:len(stack)-1]
				i += 3
				continue
			}
			if r == '`' {
				return "", entitiesError("Character '`' is reserved and must be escaped with the preceding '\\'")
			}
			out.WriteRune(r)
			i += size
			continue
		case "Code":
			if r == '`' {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			out.WriteRune(r)
			i += size
			continue
		}
		switch {
		case r == '\r':
			// ignored: it separates adjacent markers ("_\r__")
		case strings.HasPrefix(text[i:], "```"):
			nl := strings.IndexByte(text[i+3:], '\n')
			if nl >= 0 && !strings.ContainsAny(text[i+3:i+3+nl], " `") {
				stack = append(stack, open{kind: "Pre", offset: i})
				i += 3 + nl + 1
			} else {
				stack = append(stack, open{kind: "Pre", offset: i})
				i += 3
			}
			continue
		case r == '`':
			stack = append(stack, open{kind: "Code", offset: i})
		case strings.HasPrefix(text[i:], "||"):
			if err := toggle("Spoiler", i); err != nil {
				return "", err
			}
			i += 2
			continue
		case strings.HasPrefix(text[i:], "__"):
			if err := toggle("Underline", i); err != nil {
				return "", err
			}
			i += 2
			continue
		case r == '_':
			if err := toggle("Italic", i); err != nil {
				return "", err
			}
		case r == '*':
			if wasLineStart && strings.HasPrefix(text[i:], "**>") {
				i += 3
				continue
			}
			if err := toggle("Bold", i); err != nil {
				return "", err
			}
		case r == '~':
			if err := toggle("Strikethrough", i); err != nil {
				return "", err
			}
		case r == '>' && wasLineStart:
			// blockquote marker: no visible character
		case r == '[' || (r == '!' && strings.HasPrefix(text[i:], "![")):
			if r == '!' {
				i++
			}
			stack = append(stack, open{kind: "TextUrl", offset: i})
		case r == ']' && top() == "TextUrl":
			if !strings.HasPrefix(text[i+1:], "(") {
				return "", entitiesError("Character ']' is reserved and must be escaped with the preceding '\\'")
			}
			j := i + 2
			for ; j < len(text); j++ {
				if text[j] == '\\' {
					j++
					continue
				}
				if text[j] == ')' {
					break
				}
			}
			if j >= len(text) {
				return "", entitiesError("Can't find end of a URL at byte offset %d", i+1)
			}
			stack = stack[:len(stack)-1]
			i = j + 1
			continue
		case strings.ContainsRune(mdV2Reserved, r):
			return "", entitiesError("Character '%c' is reserved and must be escaped with the preceding '\\'", r)
		default:
			out.WriteRune(r)
		}
		i += size
	}
	if len(stack) > 0 {
		o := stack[len(stack)-1]
		return "", entitiesError("Can't find end of %s entity at byte offset %d", o.kind, o.offset)
	}
	return out.String(), nil
}

func parseMarkdownV1(text string) (string, error) {
	var out strings.Builder
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == '\\' && i+1 < len(text) && strings.IndexByte("_*`[", text[i+1]) >= 0:
			out.WriteByte(text[i+1])
			i += 2
		case strings.HasPrefix(text[i:], "```"):
			end := strings.Index(text[i+3:], "```")
			if end < 0 {
				return "", entitiesError("Can't find end of the entity starting at byte offset %d", i)
			}
			body := text[i+3 : i+3+end]
			if nl := strings.IndexByte(body, '\n'); nl >= 0 && !strings.ContainsAny(body[:nl], " ") {
				body = body[nl+1:]
			}
			out.WriteString(body)
			i += 3 + end + 3
		case c == '*' || c == '_' || c == '`':
			end := strings.IndexByte(text[i+1:], c)
			if end < 0 {
				return "", entitiesError("Can't find end of the entity starting at byte offset %d", i)
			}
			out.WriteString(text[i+1 : i+1+end])
			i += 1 + end + 1
		case c == '[':
			close := strings.Index(text[i:], "](")
			if close < 0 {
				out.WriteByte(c)
				i++
				continue
			}
			end := strings.IndexByte(text[i+close:], ')')
			if end < 0 {
				return "", entitiesError("Can't find end of the entity starting at byte offset %d", i)
			}
			out.WriteString(text[i+1 : i+close])
			i += close + end + 1
		default:
			_, size := utf8.DecodeRuneInString(text[i:])
			out.WriteString(text[i : i+size])
			i += size
		}
	}
	return out.String(), nil
}

// ParseText is what Telegram makes of text under parseMode ("", "HTML",
// "MarkdownV2" or "Markdown"): the visible text, or the Bot API error
// ("Bad Request: can't parse entities: ...") the text would be refused with.
// Tests use it to check text they build without a server round trip.
func ParseText(text, parseMode string) (string, error) { return parseText(text, parseMode) }

// VisibleLength is the length Telegram checks against its limits: UTF-16
// code units of the visible text.
func VisibleLength(visible string) int { return utf16Len(visible) }
