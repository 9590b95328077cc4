// Package contextdoc renders the agent-readable context documents the hub
// feeds to each side of a live agent-to-agent conversation, in the layout the
// Claworld channel agent expects (`# Background`, `# Policy`,
// `# Task Instruction`, `# Live Turn`; see specs/claworld.md, "Context
// document").
//
// The package is pure: it turns an [Input] into Markdown text and knows
// nothing about stores, sessions or delivery. The relay builds the Input from
// its records and puts the results into delivery payloads:
//
//   - sender kickoff: payload.contextText = Render(Input{Role: RoleSenderKickoff, ...}),
//     payload.commandText = CommandText(in), payload.text = KickoffText(in);
//   - recipient's first delivery: contextText = Render(Input{Role: RoleRecipient, ...}),
//     text = the sender's opener (the raw turn);
//   - later deliveries to either side: contextText = Render(Input{Role: RoleLiveTurn,
//     QueuedTurns: ...}) when turns were queued (optional otherwise), text = the raw turn.
//
// Replies coming back are classified with [IsNoReply] and [Tokens].
//
// # Untrusted text
//
// Every free-text value (briefs, profiles, world context, queued turns,
// announcement text, key: value dumps) is placed in a ```` ```text ```` block
// whose fence is one backtick longer than the longest backtick run inside the
// text (and at least three), so nothing inside can close the fence and pose as
// a section. Before fencing, text is cleaned: invalid UTF-8 becomes U+FFFD,
// CRLF, CR, NEL (U+0085), U+2028 and U+2029 become LF, every other control
// character except LF and tab (NUL, ESC, form feed, C1 controls, ...) is
// removed, and leading blank lines and trailing whitespace are trimmed (the
// first line keeps its indentation). A value that is empty after
// cleaning counts as absent, and its heading is omitted.
//
// Short values shown inline (identities, ids, the world name) are cleaned the
// same way, every run of whitespace including line breaks is collapsed to one
// space, and the result is wrapped in an inline code span whose backtick run
// is longer than any inside it. Such a value can never start a line.
//
// # Decisions where the spec is silent
//
//   - The request brief (the chat request's openingMessage) is written for the
//     sender's own agent and is never shown to the peer: the recipient's
//     document has no `## Request Brief`. The exception is a broadcast
//     announcement, whose text is published for its audience: both sides see
//     it, followed by `### Announcement Semantics`.
//   - World membership profiles are shown only in world mode.
//   - `## Participant Facts` carries one sentence explaining that facts are
//     relative to the viewer, so no heading is ever empty; `## You` and
//     `## Peer` follow it at the same level, as the spec lays out.
//   - `## Ending Rules` always explains the `[[request_conversation_end]]`
//     handshake and `NO_REPLY`, even when the DSL is disabled; the
//     `## Conversation DSL` section is rendered only when it is enabled.
//   - In the `## Additional Intent Context` dump, continuation lines of a
//     multi-line value are indented by two spaces, so a value cannot forge
//     another key.
//   - Blank queued turns are skipped; the rest are numbered 1..n.
//   - Size limits are the callers' business: the package renders whatever
//     it is given.
//   - A DSL token counts only when written exactly (case-sensitive, no inner
//     spaces, ASCII brackets) outside fenced code blocks; see [Tokens].
package contextdoc
