// Package hosted runs Telegram bots inside the hub, each bound to one
// runtime agent, with reply-end controls (Continue / Stop here) on the
// runtime's replies. It joins three parts that know nothing of each other:
// the Telegram transport (internal/telegram), the platform-neutral controls
// (internal/replyctl) and the bus (internal/bus).
//
// # Flow
//
//	Telegram ──webhook POST /v1/telegram/webhook/{bot} (secret header checked)──┐
//	         └──or getUpdates long polling (one node holds the bot's lease)─────┤
//	                                                                         dedupe by update_id
//	  typed message → replyctl.Typed (pending choice → superseded_by_message,
//	                  live keyboard removed) + bus request telegram.message to
//	                  the agent, in one transaction
//	  /controls on|off|lang → answered in the chat by the hub; not forwarded
//	  button tap    → replyctl.Tap + bus notification replyctl.choice (when the
//	                  decision changed), in one transaction; then
//	                  answerCallbackQuery with the toast; keyboard edits follow
//	runtime ──POST /v1/replyctl/bots/{bot}/replies──→ Prepare, sendMessage (split at
//	          or a response {text} to telegram.message   4096, keyboard on the last
//	                                                      chunk), ReplyShown (the
//	                                                      previous keyboard is resolved)
//	runtime ──GET …/bots/{bot}/policy?chatId=… or /v1/replyctl/conversations/{key}/policy
//
// # Bus contract
//
// Typed messages arrive as requests (from "system:telegram", action
// "telegram.message", params MessageParams) rather than notifications, so a
// runtime may answer with a response whose result is {"text": …} (or a bare
// string) and the hub sends it as the reply, controls attached; answering
// is optional and replying through the HTTP endpoint works the same.
// Choices arrive as notifications (event "replyctl.choice", message the
// decision's hint, data Choice). Both are high priority with a 24-hour TTL.
//
// # Secrets
//
// The bot token, the generated webhook secret and the generated callback
// HMAC key are stored sealed (internal/secrets: AES-256-GCM under a key
// derived from SWITCHBOARD_SECRET_KEY or the data directory's secret-key
// file) and never leave the hub's API.
package hosted
