package hosted

import "github.com/prometheus/client_golang/prometheus"

// metrics are the host's Prometheus metrics.
type metrics struct {
	// events counts replyctl events (shown, chosen, expired, rejected,
	// typed_override) by type and reason.
	events *prometheus.CounterVec
	// updates counts handled updates by kind.
	updates *prometheus.CounterVec
	// tapAnswered is the time from a tap reaching the hub's handler to its
	// callback being answered.
	tapAnswered prometheus.Histogram
	// apiErrors counts failed Bot API calls by method.
	apiErrors *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_replyctl_events_total",
			Help: "Reply-end control events of hosted Telegram bots by type (shown, chosen, expired, rejected, typed_override) and reason.",
		}, []string{"type", "reason"}),
		updates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_telegram_updates_total",
			Help: "Telegram updates handled by hosted bots, by kind (message, callback_query, controls_command, other); duplicates are not counted.",
		}, []string{"kind"}),
		tapAnswered: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "switchboard_telegram_tap_answer_seconds",
			Help:    "Time from a button tap reaching the hub to its callback query being answered.",
			Buckets: []float64{.0005, .001, .002, .003, .005, .0075, .01, .015, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		apiErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_telegram_api_errors_total",
			Help: "Bot API calls of hosted bots that failed, by method.",
		}, []string{"method"}),
	}
	if reg != nil {
		reg.MustRegister(m.events, m.updates, m.tapAnswered, m.apiErrors)
	}
	return m
}
