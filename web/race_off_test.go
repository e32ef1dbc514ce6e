//go:build !race

package web_test

// orderHistoriesDefault is how many histories TestOrderIndependence posts
// when ONCETRACE_ORDER_HISTORIES does not say (race_on_test.go has the
// number under the race detector).
const orderHistoriesDefault = 250
