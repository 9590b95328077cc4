// Package replyctl is the platform-neutral core of reply-end controls: the
// two buttons (Continue / Stop here, no further action needed) at the end of
// every assistant reply, the choice they record per conversation, and the
// policy a runtime reads before it writes its next turn. It imports no chat
// platform library; a transport (internal/telegram) turns updates into calls
// on Service and Service's answers into platform requests.
//
// # Flow
//
// A transport calls, in order of a conversation's life:
//
//	Prepare(cfg, {Where, ReplyID, LanguageCode, NoControls})
//	    → Prepared{Attach, Nonce, Buttons}: attach Buttons (one per row) to
//	      the reply's last chunk, or send it bare when !Attach.
//	ReplyShown(nonce, sentMessageID)
//	    → Edits: remove the keyboard of the reply this one superseded.
//	SeenUpdate(botID, updateID) for every update; drop duplicates.
//	Tap(cfg, {ChatID, MessageID, UserID, LanguageCode, Data, IsAdmin})
//	    → if !Ours pass the callback on untouched; else answer the callback
//	      with Toast at once, apply Edits, and when Changed push Decision to
//	      the runtime (bus notification replyctl.choice).
//	Typed(cfg, {Where}) for every user message forwarded to the
//	    runtime → Edits (the live keyboard to remove), Decision.
//	Expire(now) periodically → Edits for keyboards that expired.
//
// The HTTP layer calls Policy(key) with a key from ParseKey (path form) or
// KeyFromParams (query form), and SetChatControls / SetChatLocale.
//
// # States
//
// Each conversation (Key: bot, business connection, chat, topic thread, and
// the user in group chats when BotConfig.PerUserInGroups) has at most one
// live keyboard and a last choice:
//
//	lastChoice  none | continue | stop | superseded_by_message | expired
//	source      button | typed | timeout
//	at, replyId, messageId   when, and which reply it refers to
//
// Transitions (all serialized per conversation, each in one transaction):
//
//   - ReplyShown: the reply's nonce becomes the live keyboard; the previous
//     live one becomes superseded and its keyboard is removed. lastChoice is
//     unchanged: showing a reply records nothing about the user.
//   - Tap Continue/Stop on the live keyboard by the addressed user (or an
//     admin, if allowed): lastChoice = continue/stop, source button; the
//     keyboard is resolved (BotConfig.Resolve). Recorded once: any further
//     tap on that reply answers "already chosen" and changes nothing.
//   - Tap on a superseded or overridden reply: "no longer current", no change.
//   - Tap by someone the reply does not address: "not for you", no change.
//   - Tap after the keyboard's lifetime: "expired"; the keyboard expires.
//   - Tap with data that is malformed, signed wrongly, minted for another
//     bot or chat: "invalid", no change. Data outside the "rec<N>:"
//     namespace is not ours and is left alone.
//   - Typed message: a live keyboard is removed and its reply is overridden;
//     a pending, continue or stop lastChoice becomes superseded_by_message
//     (source typed). The message itself always goes through.
//   - Expiry: a live keyboard after BotConfig.NonceTTL, or a recorded
//     choice after BotConfig.ChoiceTTL, becomes lastChoice = expired
//     (source timeout, at = the expiry time). Reads treat due expiries as
//     expired before the sweeper writes them down.
//
// # Decision table
//
// Policy turns lastChoice into the fields a runtime acts on. Consent is the
// rule: unprompted (proactive) messages need an explicit Continue; following
// up within the next turn is fine unless the user said Stop.
//
//	lastChoice             followUpAllowed  proactiveAllowed  closed
//	none                   true             false             false
//	continue               true             true              false
//	stop                   false            false             true
//	superseded_by_message  true             false             false
//	expired                true             false             false
//
// A runtime always answers a new user message, whatever the table says:
// the table governs what it adds beyond that answer. Hint is a one-line
// English rendering of the row for LLM runtimes; the booleans are the
// contract.
//
// # Callback data
//
// "rec1:<c|s|n>:<nonce>[:<tag>]", at most 64 bytes (see Codec). The nonce
// maps in the store to the conversation, message, reply, addressed user,
// locale and status; the optional tag is a truncated HMAC-SHA256 keyed per
// bot. Resolved keyboards carry inert "n" data whose taps are answered from
// the stored state.
//
// # Storage
//
// Store is the persistence interface; DBStore implements it on the
// Switchboard store (tables replyctl_conversations, replyctl_nonces,
// replyctl_history, replyctl_chats, replyctl_updates; migrations 00500).
// Everything survives restarts; Service itself holds no state.
package replyctl
