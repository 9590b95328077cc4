package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/switchboard-hub/switchboard/client"
)

func init() {
	extraCommands = append(extraCommands, newTelegramCmd)
}

func newTelegramCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "telegram",
		Short: "Host Telegram bots with Continue / Stop reply controls",
		Long: `Host Telegram bots in the hub. Each bot is bound to a runtime agent: typed
messages reach the agent as telegram.message requests, button choices as
replyctl.choice notifications, and the agent replies (with the Continue / Stop
buttons attached) through the hub. See docs/telegram.md.`,
	}
	cmd.AddCommand(newTelegramAddCmd(), newTelegramListCmd(), newTelegramRemoveCmd(), newTelegramReplyCmd(), newTelegramPolicyCmd())
	return cmd
}

func newTelegramAddCmd() *cobra.Command {
	var p client.AddTelegramBotParams
	var tokenEnv string
	cmd := &cobra.Command{
		Use:   "add-bot --token-env VAR --agent AGENT",
		Short: "Host a bot (admin); prints its id",
		Long: `Host a bot. The token is read from the environment variable named by
--token-env (never from a flag, so it stays out of shell history), verified
with Telegram, and stored sealed in the hub. The bot id is printed alone on
stdout, so BOT=$(switchboard telegram add-bot ...) works; --json prints the bot.

--mode poll (the default) long-polls Telegram from the hub and needs no public
URL; --mode webhook has Telegram POST to the hub's --public-url.`,
		Example: `  export BOT_TOKEN=123456:ABC...   # from @BotFather
  switchboard telegram add-bot --token-env BOT_TOKEN --agent agt_...
  switchboard telegram add-bot --token-env BOT_TOKEN --agent agt_... --mode webhook --scope dm
  switchboard telegram add-bot --token-env BOT_TOKEN --agent agt_... --api-url http://127.0.0.1:8081`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if tokenEnv == "" {
				return errors.New("--token-env is required: the name of the environment variable holding the bot token")
			}
			p.Token = os.Getenv(tokenEnv)
			if p.Token == "" {
				return fmt.Errorf("environment variable %s is empty or unset; export the token from @BotFather into it", tokenEnv)
			}
			b, err := newClient().AddTelegramBot(cmd.Context(), p)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), b)
			}
			fmt.Fprintln(cmd.OutOrStdout(), b.ID)
			fmt.Fprintf(cmd.ErrOrStderr(), "hosting @%s for %s (%s mode, controls: %s)\n", b.Username, b.AgentID, b.Mode, b.Scope)
			if b.WebhookURL != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "webhook: %s\n", b.WebhookURL)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&tokenEnv, "token-env", "", "environment variable holding the bot token")
	f.StringVar(&p.AgentID, "agent", "", "runtime agent the bot is bound to")
	f.StringVar(&p.Mode, "mode", "poll", "poll or webhook")
	f.StringVar(&p.Scope, "scope", "all", "chats that get controls: off, dm, group or all")
	f.StringVar(&p.APIURL, "api-url", "", "Bot API server base URL (default https://api.telegram.org)")
	f.StringVar(&p.Resolve, "resolve", "", "look of a chosen keyboard: mark (default), disable or remove")
	f.StringVar(&p.DefaultLocale, "locale", "", "button language when neither chat nor user says: en (default), zh-TW, zh-CN")
	f.BoolVar(&p.PerUserInGroups, "per-user-in-groups", false, "give each group member a conversation (and choice) of their own")
	_ = cmd.MarkFlagRequired("agent")
	return cmd
}

func newTelegramListCmd() *cobra.Command {
	var agent string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List hosted bots (all for the admin, your own for an agent)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			bots, err := newClient().TelegramBots(cmd.Context(), agent)
			if err != nil {
				return err
			}
			return output(cmd, bots, func(w io.Writer) {
				rows := make([][]string, len(bots))
				for i, b := range bots {
					rows[i] = []string{b.ID, "@" + b.Username, b.AgentID, b.Mode, b.Scope, b.CreatedAt.Format("2006-01-02 15:04:05Z")}
				}
				table(w, []string{"ID", "BOT", "AGENT", "MODE", "SCOPE", "CREATED"}, rows)
			})
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "only bots bound to this agent (admin)")
	return cmd
}

func newTelegramRemoveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "remove BOT",
		Short: "Stop hosting a bot (admin); its conversation state is kept",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := newClient().RemoveTelegramBot(cmd.Context(), args[0]); err != nil {
				return err
			}
			return output(cmd, map[string]any{"id": args[0], "removed": true}, func(w io.Writer) {
				fmt.Fprintf(w, "removed %s\n", args[0])
			})
		},
	}
}

func newTelegramReplyCmd() *cobra.Command {
	var r client.TelegramReply
	var noControls bool
	var file string
	cmd := &cobra.Command{
		Use:   "reply BOT --chat ID [TEXT | --file F]",
		Short: "Send a reply through a bot, with Continue / Stop (handy for trying it by hand)",
		Example: `  switchboard telegram reply bot_... --chat 123456789 "Done. Anything else?"
  switchboard telegram reply bot_... --chat -100123 --thread 42 --user 123456789 --file answer.md --parse-mode MarkdownV2`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 2 && file == "":
				r.Text = args[1]
			case len(args) == 1 && file != "":
				var b []byte
				var err error
				if file == "-" {
					b, err = io.ReadAll(cmd.InOrStdin())
				} else {
					b, err = os.ReadFile(file)
				}
				if err != nil {
					return err
				}
				r.Text = string(b)
			default:
				return errors.New("give the text as an argument or with --file (- for stdin), not both")
			}
			if noControls {
				off := false
				r.Controls = &off
			}
			res, err := newClient().SendTelegramReply(cmd.Context(), args[0], r)
			if err != nil {
				return err
			}
			return output(cmd, res, func(w io.Writer) {
				ids := make([]string, len(res.MessageIDs))
				for i, id := range res.MessageIDs {
					ids[i] = strconv.FormatInt(id, 10)
				}
				fmt.Fprintf(w, "sent message(s) %v in %s\n", ids, res.Conversation)
				if res.Controls {
					fmt.Fprintf(w, "controls attached (until %s)\n", res.ExpiresAt.Format("2006-01-02 15:04:05Z"))
				} else {
					fmt.Fprintf(w, "no controls (%s)\n", res.Reason)
				}
			})
		},
	}
	f := cmd.Flags()
	f.Int64Var(&r.ChatID, "chat", 0, "chat id")
	f.Int64Var(&r.ThreadID, "thread", 0, "forum topic id")
	f.StringVar(&r.BusinessConnectionID, "business", "", "business connection id")
	f.Int64Var(&r.UserID, "user", 0, "the user the reply answers (in groups only they may choose)")
	f.StringVar(&r.ParseMode, "parse-mode", "", "HTML, MarkdownV2 or Markdown")
	f.StringVar(&r.LanguageCode, "lang", "", "button language (a Telegram language_code such as en or zh-hant)")
	f.StringVar(&r.ReplyID, "reply-id", "", "your id for this reply (comes back in the policy)")
	f.BoolVar(&noControls, "no-controls", false, "send without Continue / Stop")
	f.StringVar(&file, "file", "", "read the text from a file (- for stdin)")
	_ = cmd.MarkFlagRequired("chat")
	return cmd
}

func newTelegramPolicyCmd() *cobra.Command {
	var q client.PolicyQuery
	var key string
	cmd := &cobra.Command{
		Use:   "policy (BOT --chat ID | --key KEY)",
		Short: "Show a conversation's reply-end decision",
		Example: `  switchboard telegram policy bot_... --chat 123456789
  switchboard telegram policy --key 'bot_...:-100123:t42'`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var d client.Decision
			var err error
			switch {
			case key != "" && len(args) == 0:
				d, err = newClient().ReplyPolicyByKey(cmd.Context(), key)
			case key == "" && len(args) == 1 && q.ChatID != 0:
				d, err = newClient().ReplyPolicy(cmd.Context(), args[0], q)
			default:
				return errors.New("give a bot and --chat, or --key")
			}
			if err != nil {
				return err
			}
			return output(cmd, d, func(w io.Writer) {
				fmt.Fprintf(w, "conversation      %s\n", d.Conversation)
				fmt.Fprintf(w, "lastChoice        %s", d.LastChoice)
				if d.Source != "" {
					fmt.Fprintf(w, " (%s, %s)", d.Source, d.At.Format("2006-01-02 15:04:05Z"))
				}
				fmt.Fprintln(w)
				fmt.Fprintf(w, "followUpAllowed   %v\nproactiveAllowed  %v\nclosed            %v\n", d.FollowUpAllowed, d.ProactiveAllowed, d.Closed)
				fmt.Fprintf(w, "hint              %s\n", d.Hint)
			})
		},
	}
	f := cmd.Flags()
	f.Int64Var(&q.ChatID, "chat", 0, "chat id")
	f.Int64Var(&q.ThreadID, "thread", 0, "forum topic id")
	f.StringVar(&q.BusinessConnectionID, "business", "", "business connection id")
	f.Int64Var(&q.UserID, "user", 0, "user id (bots with per-user conversations in groups)")
	f.StringVar(&key, "key", "", "conversation key instead of bot and chat")
	return cmd
}
