package gateway

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/bus"
)

// okFrame splices the ref into the result object; a client reading the
// frame sees the same members a map merge would give it.
func TestOKFrame(t *testing.T) {
	cases := []struct {
		name   string
		ref    string
		result any
		want   map[string]any
	}{
		{"empty result", "h1", map[string]any{}, map[string]any{"ref": "h1"}},
		{"send result", "s1", bus.Result{ID: "msg_1", TraceID: "trc_1", Deliveries: 1, DeliveryIDs: []string{"dlv_1"}},
			map[string]any{"ref": "s1", "id": "msg_1", "traceId": "trc_1", "deliveries": float64(1), "deliveryIds": []any{"dlv_1"}}},
		{"settle", `a"1`, bus.Settle{DeliveryID: "dlv_1", State: "acked", Attempt: 2},
			map[string]any{"ref": `a"1`, "deliveryId": "dlv_1", "state": "acked", "attempt": float64(2)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := okFrame(tc.ref, tc.result)
			if err != nil {
				t.Fatal(err)
			}
			var f struct {
				Event string         `json:"event"`
				Data  map[string]any `json:"data"`
			}
			if err := json.Unmarshal(b, &f); err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			if f.Event != "ok" || !reflect.DeepEqual(f.Data, tc.want) {
				t.Fatalf("got %s, want data %v", b, tc.want)
			}
		})
	}
	if _, err := okFrame("x", []int{1}); err == nil {
		t.Fatal("a result that is not an object was spliced")
	}
}
