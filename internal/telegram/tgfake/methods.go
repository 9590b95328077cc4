package tgfake

import (
	"strconv"
	"strings"
)

// The Bot API limits the fake enforces.
const (
	maxTextLen   = 4096 // sendMessage/editMessageText text, UTF-16 units after entity parsing
	maxAnswerLen = 200  // answerCallbackQuery text
)

func (b *Bot) getMe() wUser {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	u := b.user.wire()
	u.CanJoinGroups = boolPtr(true)
	u.CanReadAllGroupMessages = boolPtr(false)
	u.SupportsInlineQueries = boolPtr(false)
	u.CanConnectToBusiness = boolPtr(true)
	return u
}

// resolveChatLocked finds the chat named by chat_id (an integer id or
// @username) and, for business_connection_id, checks the connection.
func (b *Bot) resolveChatLocked(p params) (*Chat, string, *apiError) {
	raw := strings.TrimSpace(p.str("chat_id"))
	if raw == "" {
		return nil, "", errBadRequest("chat_id is empty")
	}
	bc := p.str("business_connection_id")
	if bc != "" {
		if _, ok := b.business[bc]; !ok {
			return nil, "", errBadRequest(descBizNotFound)
		}
	}
	if strings.HasPrefix(raw, "@") {
		for _, c := range b.chats {
			if c.Type != ChatPrivate && strings.EqualFold("@"+c.Username, raw) {
				return c, bc, nil
			}
		}
		return nil, "", errBadRequest(descChatNotFound)
	}
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return nil, "", errBadRequest(descChatNotFound)
	}
	if bc != "" {
		// a business account's chats are the account's private chats: any
		// user the bot knows about is reachable through the connection.
		if id <= 0 {
			return nil, "", errBadRequest(descChatNotFound)
		}
		return &Chat{ID: id, Type: ChatPrivate}, bc, nil
	}
	c, ok := b.chats[id]
	if !ok {
		return nil, "", errBadRequest(descChatNotFound)
	}
	return c, bc, nil
}

// checkText validates text under a parse mode and returns its visible form.
func checkText(p params) (visible string, aerr *apiError) {
	text := p.str("text")
	visible, err := parseText(text, p.str("parse_mode"))
	if err != nil {
		return "", err.(*apiError)
	}
	if strings.TrimSpace(visible) == "" {
		return "", errBadRequest(descTextEmpty)
	}
	if utf16Len(visible) > maxTextLen {
		return "", errBadRequest(descTooLong)
	}
	return visible, nil
}

func (b *Bot) sendMessage(p params) (*wMessage, *apiError) {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	c, bc, err := b.resolveChatLocked(p)
	if err != nil {
		return nil, err
	}
	thread, err := p.int64("message_thread_id")
	if err != nil {
		return nil, err
	}
	if thread != 0 && (bc != "" || b.topics[c.ID][int(thread)] == "") {
		return nil, errBadRequest(descThreadMissing)
	}
	visible, err := checkText(p)
	if err != nil {
		return nil, err
	}
	kb, err := parseReplyMarkup(p.str("reply_markup"), false)
	if err != nil {
		return nil, err
	}
	d := b.dialogLocked(dialogKey{business: bc, chat: c.ID})
	d.next++
	from := b.user
	if bc != "" {
		from = b.business[bc].owner
	}
	m := &Message{ID: d.next, Chat: *c, ThreadID: int(thread), BusinessConnectionID: bc, From: from, ByBot: true,
		Text: visible, RawText: p.str("text"), ParseMode: p.str("parse_mode"), Keyboard: kb, Date: b.now()}
	m.Chat.BusinessConnectionID = bc
	d.msgs = append(d.msgs, m)
	d.byID[m.ID] = m
	return b.wireMessageLocked(m), nil
}

// editTargetLocked finds the message an edit method names.
func (b *Bot) editTargetLocked(p params) (*Message, *apiError) {
	if p.str("inline_message_id") != "" {
		// inline-mode messages are not modelled
		return nil, errBadRequest(descEditNotFound)
	}
	c, bc, err := b.resolveChatLocked(p)
	if err != nil {
		return nil, err
	}
	id, err := p.int64("message_id")
	if err != nil {
		return nil, err
	}
	if id <= 0 {
		return nil, errBadRequest(descEditNotFound)
	}
	d := b.dialogs[dialogKey{business: bc, chat: c.ID}]
	if d == nil || d.byID[int(id)] == nil {
		return nil, errBadRequest(descEditNotFound)
	}
	m := d.byID[int(id)]
	if !m.ByBot {
		return nil, errBadRequest("message can't be edited")
	}
	return m, nil
}

func (b *Bot) editMessageText(p params) (*wMessage, *apiError) {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	if _, _, err := b.resolveChatLocked(p); err != nil && p.str("inline_message_id") == "" {
		return nil, err
	}
	visible, err := checkText(p)
	if err != nil {
		return nil, err
	}
	kb, err := parseReplyMarkup(p.str("reply_markup"), true)
	if err != nil {
		return nil, err
	}
	m, err := b.editTargetLocked(p)
	if err != nil {
		return nil, err
	}
	// editMessageText without reply_markup removes the inline keyboard
	if m.Text == visible && m.Keyboard.equal(kb) {
		return nil, errBadRequest(descNotModified)
	}
	m.Text, m.RawText, m.ParseMode, m.Keyboard = visible, p.str("text"), p.str("parse_mode"), kb
	m.EditDate = b.now()
	m.Edits++
	return b.wireMessageLocked(m), nil
}

func (b *Bot) editMessageReplyMarkup(p params) (*wMessage, *apiError) {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	kb, err := parseReplyMarkup(p.str("reply_markup"), true)
	if err != nil {
		return nil, err
	}
	m, err := b.editTargetLocked(p)
	if err != nil {
		return nil, err
	}
	if m.Keyboard.equal(kb) {
		return nil, errBadRequest(descNotModified)
	}
	m.Keyboard = kb
	m.EditDate = b.now()
	m.Edits++
	return b.wireMessageLocked(m), nil
}

func (b *Bot) answerCallbackQuery(p params) *apiError {
	id := p.str("callback_query_id")
	text := p.str("text")
	if utf16Len(text) > maxAnswerLen {
		return errBadRequest(descAnswerTooLong)
	}
	alert, err := p.bool("show_alert")
	if err != nil {
		return err
	}
	cache, err := p.int64("cache_time")
	if err != nil {
		return err
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	q, ok := b.queries[id]
	if !ok || q.answered || b.now().Sub(q.at) > b.s.queryTTL {
		return errBadRequest(descQueryTooOld)
	}
	q.answered = true
	b.answers = append(b.answers, CallbackAnswer{QueryID: id, Text: text, ShowAlert: alert, URL: p.str("url"),
		CacheTime: int(cache), At: b.now()})
	return nil
}
