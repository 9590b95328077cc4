package a2a

// NewPushSender exposes the hub's webhook sender to the tests.
var NewPushSender = newPushSender
