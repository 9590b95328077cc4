package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"time"
)

// ExecInput is the JSON document an [Exec] command reads on stdin. Every
// key is always present (empty strings and an empty list when the hub sent
// nothing), so scripts can read it without checks.
type ExecInput struct {
	DeliveryID      string `json:"deliveryId"`
	SessionKey      string `json:"sessionKey"`
	DeliveryType    string `json:"deliveryType"`
	ConversationKey string `json:"conversationKey"`
	ChatRequestID   string `json:"chatRequestId"`
	WorldID         string `json:"worldId"`
	// Baseline is true when ContextText is a full context document (the
	// start of a new intent in this session).
	Baseline         bool              `json:"baseline"`
	ContextText      string            `json:"contextText"`
	CommandText      string            `json:"commandText"`
	Text             string            `json:"text"`
	UntrustedContext []json.RawMessage `json:"untrustedContext"`
	// Metadata is the delivery's metadata object as the hub sent it.
	Metadata json.RawMessage `json:"metadata"`
}

// NewExecInput builds the stdin document for d.
func NewExecInput(d Delivery) ExecInput {
	meta := d.RawMetadata
	if len(meta) == 0 {
		meta, _ = json.Marshal(d.Metadata)
	}
	uc := d.Payload.UntrustedContext
	if uc == nil {
		uc = []json.RawMessage{}
	}
	return ExecInput{
		DeliveryID: d.DeliveryID, SessionKey: d.SessionKey, DeliveryType: d.Metadata.DeliveryType,
		ConversationKey: d.ConversationKey, ChatRequestID: d.ChatRequestID, WorldID: d.WorldID,
		Baseline: d.Baseline(), ContextText: d.Payload.ContextText, CommandText: d.Payload.CommandText,
		Text: d.Payload.Text, UntrustedContext: uc, Metadata: meta,
	}
}

// Exec is a driver that runs a shell command per delivery: `sh -c Command`
// with the [ExecInput] JSON on stdin. Its standard output, trimmed, is the
// reply (exactly NO_REPLY keeps silent). A non-zero exit, a timeout or an
// empty output is an error, so the delivery stays unanswered and the hub
// redelivers it later.
//
// The command also gets SWITCHBOARD_DELIVERY_ID, SWITCHBOARD_SESSION_KEY
// and SWITCHBOARD_DELIVERY_TYPE in its environment. On timeout the whole
// process group is killed, so children of the shell do not linger.
type Exec struct {
	// Command is run with `sh -c`.
	Command string
	// Timeout bounds one run (default 2 minutes).
	Timeout time.Duration
	// Dir is the working directory (default: the runner's).
	Dir string
	// Env is added to the runner's environment.
	Env []string
	// Logger receives the command's standard error at debug level.
	Logger *slog.Logger
}

// Output limits: a reply is text for a peer, not a file transfer.
const (
	maxExecStdout = 1 << 20
	maxExecStderr = 4 << 10
)

// Reply runs the command for d.
func (e *Exec) Reply(ctx context.Context, d Delivery) (string, error) {
	if strings.TrimSpace(e.Command) == "" {
		return "", errors.New("exec: no command")
	}
	timeout := e.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	enc.SetEscapeHTML(false) // peers write <, > and & freely
	if err := enc.Encode(NewExecInput(d)); err != nil {
		return "", fmt.Errorf("exec: encode input: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(rctx, "sh", "-c", e.Command)
	cmd.Dir = e.Dir
	cmd.Env = append(os.Environ(), e.Env...)
	cmd.Env = append(cmd.Env,
		"SWITCHBOARD_DELIVERY_ID="+d.DeliveryID,
		"SWITCHBOARD_SESSION_KEY="+d.SessionKey,
		"SWITCHBOARD_DELIVERY_TYPE="+d.Metadata.DeliveryType)
	cmd.Stdin = &in
	stdout := &capBuffer{max: maxExecStdout}
	stderr := &tailBuffer{max: maxExecStderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	killGroup(cmd)
	// Grandchildren that keep stdout open must not hold Wait forever.
	cmd.WaitDelay = 2 * time.Second

	err := cmd.Run()
	if se := strings.TrimSpace(stderr.String()); se != "" && e.Logger != nil {
		e.Logger.Debug("exec stderr", "deliveryId", d.DeliveryID, "stderr", se)
	}
	switch {
	case rctx.Err() == context.DeadlineExceeded && ctx.Err() == nil:
		return "", fmt.Errorf("exec: %q timed out after %s (process group killed)", e.Command, timeout)
	case ctx.Err() != nil:
		return "", ctx.Err()
	case err != nil:
		if se := strings.TrimSpace(stderr.String()); se != "" {
			return "", fmt.Errorf("exec: %q: %w: %s", e.Command, err, se)
		}
		return "", fmt.Errorf("exec: %q: %w", e.Command, err)
	case stdout.overflow:
		return "", fmt.Errorf("exec: %q wrote more than %d bytes", e.Command, maxExecStdout)
	}
	out := strings.TrimSpace(stdout.String())
	if out == "" {
		return "", fmt.Errorf("exec: %q printed nothing (print NO_REPLY to keep silent)", e.Command)
	}
	return out, nil
}

// capBuffer keeps the first max bytes and notes an overflow.
type capBuffer struct {
	bytes.Buffer
	max      int
	overflow bool
}

func (b *capBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); len(p) > room {
		b.overflow = true
		b.Buffer.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

// tailBuffer keeps the last max bytes.
type tailBuffer struct {
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = append([]byte(nil), b.buf[len(b.buf)-b.max:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string { return string(b.buf) }
