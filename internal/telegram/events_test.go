package telegram

import (
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"
)

func TestParseControlsCommand(t *testing.T) {
	cases := []struct {
		text, bot string
		want      ControlsCommand
	}{
		{"/controls on", "reply_bot", ControlsOn},
		{"/controls off", "reply_bot", ControlsOff},
		{"/controls OFF", "reply_bot", ControlsOff},
		{"  /controls   on  ", "reply_bot", ControlsOn},
		{"/controls\non", "reply_bot", ControlsOn},
		{"/controls", "reply_bot", ControlsStatus},
		{"/controls maybe", "reply_bot", ControlsInvalid},
		{"/controls on now", "reply_bot", ControlsInvalid},
		{"/controls@reply_bot off", "reply_bot", ControlsOff},
		{"/controls@Reply_Bot on", "reply_bot", ControlsOn},
		{"/controls@reply_bot off", "@reply_bot", ControlsOff},
		{"/controls@other_bot off", "reply_bot", ControlsNone},
		{"/controls@other_bot off", "", ControlsOff},
		{"/CONTROLS on", "reply_bot", ControlsOn},
		{"/controlsx on", "reply_bot", ControlsNone},
		{"please /controls off", "reply_bot", ControlsNone},
		{"controls off", "reply_bot", ControlsNone},
		{"", "reply_bot", ControlsNone},
		{"/start", "reply_bot", ControlsNone},
	}
	for _, tc := range cases {
		if got := ParseControlsCommand(tc.text, tc.bot); got != tc.want {
			t.Errorf("ParseControlsCommand(%q, %q) = %q, want %q", tc.text, tc.bot, got, tc.want)
		}
	}
}

func TestNormalize(t *testing.T) {
	date := time.Unix(1767225600, 0).UTC()
	cases := []struct {
		name string
		json string
		msg  *TypedMessage
		tap  *CallbackTap
	}{
		{
			name: "private text",
			json: `{"update_id":10,"message":{"message_id":5,"from":{"id":1001,"is_bot":false,"first_name":"A","username":"alice","language_code":"zh-hant"},"chat":{"id":1001,"type":"private"},"date":1767225600,"text":"hello"}}`,
			msg:  &TypedMessage{ChatID: 1001, ChatType: "private", UserID: 1001, Username: "alice", LanguageCode: "zh-hant", MessageID: 5, Text: "hello", Date: date},
		},
		{
			name: "group command for this bot",
			json: `{"update_id":11,"message":{"message_id":6,"from":{"id":1002,"is_bot":false,"first_name":"B"},"chat":{"id":-5,"type":"group","title":"T"},"date":1767225600,"text":"/controls@reply_bot off","entities":[{"type":"bot_command","offset":0,"length":19}]}}`,
			msg:  &TypedMessage{ChatID: -5, ChatType: "group", UserID: 1002, MessageID: 6, Text: "/controls@reply_bot off", Date: date, Controls: ControlsOff},
		},
		{
			name: "group command for another bot",
			json: `{"update_id":12,"message":{"message_id":7,"from":{"id":1002,"is_bot":false,"first_name":"B"},"chat":{"id":-5,"type":"group"},"date":1767225600,"text":"/controls@other_bot off"}}`,
			msg:  &TypedMessage{ChatID: -5, ChatType: "group", UserID: 1002, MessageID: 7, Text: "/controls@other_bot off", Date: date},
		},
		{
			name: "forum topic",
			json: `{"update_id":13,"message":{"message_id":40,"message_thread_id":33,"is_topic_message":true,"from":{"id":1002,"is_bot":false,"first_name":"B"},"chat":{"id":-1001,"type":"supergroup","is_forum":true},"date":1767225600,"text":"in topic"}}`,
			msg:  &TypedMessage{ChatID: -1001, ChatType: "supergroup", ThreadID: 33, UserID: 1002, MessageID: 40, Text: "in topic", Date: date},
		},
		{
			name: "reply thread outside a forum is not a topic",
			json: `{"update_id":14,"message":{"message_id":41,"message_thread_id":30,"from":{"id":1002,"is_bot":false,"first_name":"B"},"chat":{"id":-1002,"type":"supergroup"},"date":1767225600,"text":"reply"}}`,
			msg:  &TypedMessage{ChatID: -1002, ChatType: "supergroup", UserID: 1002, MessageID: 41, Text: "reply", Date: date},
		},
		{
			name: "business message",
			json: `{"update_id":15,"business_message":{"message_id":8,"business_connection_id":"bc1","from":{"id":3001,"is_bot":false,"first_name":"C"},"chat":{"id":3001,"type":"private"},"date":1767225600,"text":"hi shop"}}`,
			msg:  &TypedMessage{ChatID: 3001, ChatType: "private", BusinessConnectionID: "bc1", UserID: 3001, MessageID: 8, Text: "hi shop", Date: date},
		},
		{
			name: "the bot's own business reply is not typed",
			json: `{"update_id":16,"business_message":{"message_id":9,"business_connection_id":"bc1","from":{"id":2001,"is_bot":false,"first_name":"Shop"},"sender_business_bot":{"id":7,"is_bot":true,"first_name":"bot"},"chat":{"id":3001,"type":"private"},"date":1767225600,"text":"reply"}}`,
		},
		{
			name: "photo with caption",
			json: `{"update_id":17,"message":{"message_id":10,"from":{"id":1001,"is_bot":false,"first_name":"A"},"chat":{"id":1001,"type":"private"},"date":1767225600,"photo":[{"file_id":"f","file_unique_id":"u","width":1,"height":1}],"caption":"look"}}`,
			msg:  &TypedMessage{ChatID: 1001, ChatType: "private", UserID: 1001, MessageID: 10, Text: "look", Date: date},
		},
		{
			name: "sticker counts as typed",
			json: `{"update_id":18,"message":{"message_id":11,"from":{"id":1001,"is_bot":false,"first_name":"A"},"chat":{"id":1001,"type":"private"},"date":1767225600,"sticker":{"file_id":"f","file_unique_id":"u","type":"regular","width":1,"height":1,"is_animated":false,"is_video":false}}}`,
			msg:  &TypedMessage{ChatID: 1001, ChatType: "private", UserID: 1001, MessageID: 11, Date: date},
		},
		{
			name: "service message is not typed",
			json: `{"update_id":19,"message":{"message_id":12,"from":{"id":1001,"is_bot":false,"first_name":"A"},"chat":{"id":-5,"type":"group"},"date":1767225600,"new_chat_members":[{"id":1003,"is_bot":false,"first_name":"D"}]}}`,
		},
		{
			name: "another bot's message is not typed",
			json: `{"update_id":20,"message":{"message_id":13,"from":{"id":9,"is_bot":true,"first_name":"X"},"chat":{"id":-5,"type":"group"},"date":1767225600,"text":"beep"}}`,
		},
		{
			name: "edited message is neither",
			json: `{"update_id":21,"edited_message":{"message_id":5,"from":{"id":1001,"is_bot":false,"first_name":"A"},"chat":{"id":1001,"type":"private"},"date":1767225600,"edit_date":1767225700,"text":"hello!"}}`,
		},
		{
			name: "tap in a topic",
			json: `{"update_id":22,"callback_query":{"id":"q1","from":{"id":1002,"is_bot":false,"first_name":"B","username":"bob","language_code":"en"},"message":{"message_id":50,"message_thread_id":33,"is_topic_message":true,"from":{"id":7,"is_bot":true,"first_name":"bot"},"chat":{"id":-1001,"type":"supergroup","is_forum":true},"date":1767225600,"text":"reply"},"chat_instance":"ci","data":"rec1:c:abc"}}`,
			tap:  &CallbackTap{QueryID: "q1", ChatID: -1001, ChatType: "supergroup", ThreadID: 33, MessageID: 50, MessageAccessible: true, UserID: 1002, Username: "bob", LanguageCode: "en", Data: "rec1:c:abc"},
		},
		{
			name: "tap on a business message",
			json: `{"update_id":23,"callback_query":{"id":"q2","from":{"id":3001,"is_bot":false,"first_name":"C"},"message":{"message_id":9,"business_connection_id":"bc1","from":{"id":2001,"is_bot":false,"first_name":"Shop"},"chat":{"id":3001,"type":"private"},"date":1767225600,"text":"reply"},"chat_instance":"ci","data":"rec1:s:abc"}}`,
			tap:  &CallbackTap{QueryID: "q2", ChatID: 3001, ChatType: "private", BusinessConnectionID: "bc1", MessageID: 9, MessageAccessible: true, UserID: 3001, Data: "rec1:s:abc"},
		},
		{
			name: "tap on an inaccessible message",
			json: `{"update_id":24,"callback_query":{"id":"q3","from":{"id":1001,"is_bot":false,"first_name":"A"},"message":{"chat":{"id":1001,"type":"private"},"message_id":3,"date":0},"chat_instance":"ci","data":"rec1:c:old"}}`,
			tap:  &CallbackTap{QueryID: "q3", ChatID: 1001, ChatType: "private", MessageID: 3, UserID: 1001, Data: "rec1:c:old"},
		},
		{
			name: "tap on an inline-mode message",
			json: `{"update_id":25,"callback_query":{"id":"q4","from":{"id":1001,"is_bot":false,"first_name":"A"},"inline_message_id":"AAA","chat_instance":"ci","data":"x"}}`,
			tap:  &CallbackTap{QueryID: "q4", InlineMessageID: "AAA", UserID: 1001, Data: "x"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, err := DecodeUpdate([]byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			ev := Normalize("bot_1", "reply_bot", u)
			if ev.BotID != "bot_1" || ev.UpdateID != u.ID || ev.Raw != u {
				t.Fatalf("envelope = %+v", ev)
			}
			if !reflect.DeepEqual(ev.Message, tc.msg) {
				t.Fatalf("message\n got %+v\nwant %+v", ev.Message, tc.msg)
			}
			if !reflect.DeepEqual(ev.Tap, tc.tap) {
				t.Fatalf("tap\n got %+v\nwant %+v", ev.Tap, tc.tap)
			}
		})
	}
}

func TestDecodeUpdateRejects(t *testing.T) {
	for _, body := range []string{``, `[]`, `null`, `{}`, `{"update_id":0}`, `{"update_id":-3}`, `{"update_id":"7"}`, `{"update_id":1,"message":5}`, `not json`} {
		if _, err := DecodeUpdate([]byte(body)); err == nil {
			t.Errorf("DecodeUpdate(%q) accepted", body)
		}
	}
}

func FuzzNormalize(f *testing.F) {
	f.Add([]byte(`{"update_id":10,"message":{"message_id":5,"from":{"id":1,"is_bot":false,"first_name":"A"},"chat":{"id":1,"type":"private"},"date":1,"text":"/controls@reply_bot off"}}`))
	f.Add([]byte(`{"update_id":22,"callback_query":{"id":"q1","from":{"id":2,"is_bot":false,"first_name":"B"},"message":{"message_id":50,"chat":{"id":-1,"type":"supergroup"},"date":0},"data":"rec1:c:abc"}}`))
	f.Add([]byte(`{"update_id":15,"business_message":{"message_id":8,"business_connection_id":"bc1","chat":{"id":3,"type":"private"},"date":1,"text":"hi"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		u, err := DecodeUpdate(body)
		if err != nil {
			return
		}
		ev := Normalize("b", "reply_bot", u)
		if ev.Message != nil && ev.Tap != nil {
			t.Fatal("an event is a message or a tap, not both")
		}
		if ev.UpdateID <= 0 {
			t.Fatalf("accepted update id %d", ev.UpdateID)
		}
		if ev.Message != nil && ev.Message.Controls != ControlsNone && !strings.HasPrefix(strings.ToLower(strings.TrimSpace(ev.Message.Text)), "/controls") {
			t.Fatalf("controls command from %q", ev.Message.Text)
		}
	})
}

func FuzzParseControlsCommand(f *testing.F) {
	for _, s := range []string{"/controls on", "/controls@bot off", "/controls", "/controls@ on", "/controls@@x on"} {
		f.Add(s, "bot")
	}
	f.Fuzz(func(t *testing.T, text, bot string) {
		switch got := ParseControlsCommand(text, bot); got {
		case ControlsNone:
		case ControlsOn, ControlsOff, ControlsStatus, ControlsInvalid:
			if !strings.HasPrefix(strings.ToLower(strings.TrimLeftFunc(text, unicode.IsSpace)), "/controls") {
				t.Fatalf("%q parsed as %q", text, got)
			}
		default:
			t.Fatalf("unknown result %q", got)
		}
	})
}
