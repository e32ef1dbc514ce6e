//go:build race

package web_test

// orderHistoriesDefault is how many histories TestOrderIndependence posts
// when ONCETRACE_ORDER_HISTORIES does not say. The race detector slows
// SQLite some twentyfold (a history costs 1.5 s instead of 0.08 s): under
// it the test only keeps its own harness race-clean, and make test runs it
// again without -race on 250.
const orderHistoriesDefault = 8
