-- +goose Up
-- Every state change of a delivery (queued -> leased -> acked) used to
-- rewrite each index that has state as a column: the lease, expiry and
-- availability indexes besides the claim index. Each of them only serves
-- queries for one or two states, so they become partial indexes over
-- just those rows: a state change now enters or leaves them instead of
-- moving an entry inside them, and they stay the size of the live inboxes
-- rather than of the whole history. The claim index keeps every state: by
-- agent it also serves inbox depths, recent deliveries and dead letters.
DROP INDEX bus_deliveries_lease;
DROP INDEX bus_deliveries_expiry;
DROP INDEX bus_deliveries_available;
CREATE INDEX bus_deliveries_lease ON bus_deliveries (lease_until) WHERE state = 'leased';
CREATE INDEX bus_deliveries_expiry ON bus_deliveries (expires_at) WHERE state IN ('queued', 'leased');
CREATE INDEX bus_deliveries_available ON bus_deliveries (available_at) WHERE state = 'queued';
-- Dead letters were found through the state-led indexes.
CREATE INDEX bus_deliveries_dead ON bus_deliveries (updated_at) WHERE state IN ('dead', 'replayed');

-- +goose Down
DROP INDEX bus_deliveries_dead;
DROP INDEX bus_deliveries_lease;
DROP INDEX bus_deliveries_expiry;
DROP INDEX bus_deliveries_available;
CREATE INDEX bus_deliveries_lease ON bus_deliveries (state, lease_until);
CREATE INDEX bus_deliveries_expiry ON bus_deliveries (state, expires_at);
CREATE INDEX bus_deliveries_available ON bus_deliveries (state, available_at);
