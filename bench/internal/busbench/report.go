package busbench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteTable prints results as a Markdown table, followed by each row's
// notes and first error.
func WriteTable(w io.Writer, rs []Result) {
	fmt.Fprintln(w, "| system | store | mode | lifecycles/s | accept p50 | accept p99 | send→delivery p50 | send→delivery p99 | send→ack p99 | delivered/sent | CPU/op | errors |")
	fmt.Fprintln(w, "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range rs {
		mode := r.Mode
		if r.Offered > 0 {
			mode = fmt.Sprintf("open, %d/s offered", r.Offered)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %.0f | %s | %s | %s | %s | %s | %d/%d | %s | %d |\n",
			r.System, r.Store, mode, r.Throughput, ms(r.Accept.P50), ms(r.Accept.P99), ms(r.Delivery.P50), ms(r.Delivery.P99),
			ms(r.Lifecycle.P99), r.Delivered, r.Sent, us(r.CPUPerOp()), r.Errors)
	}
	fmt.Fprintln(w)
	for _, r := range rs {
		notes := []string{fmt.Sprintf("load %s, fsync %s; CPU in window: bench process %.2fs, server process %.2fs", r.Load, ms(r.Fsync), r.CPUSelf.Seconds(), r.CPUServer.Seconds())}
		if r.Notes != "" {
			notes = append(notes, r.Notes)
		}
		if r.FirstError != "" {
			notes = append(notes, "first error: "+r.FirstError)
		}
		if len(notes) > 0 {
			fmt.Fprintf(w, "- %s/%s/%s: %s\n", r.System, r.Store, r.Mode, strings.Join(notes, "; "))
		}
	}
}

func us(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
}

func ms(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}
