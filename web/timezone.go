package web

import (
	"net/http"
	"strings"
	"sync"
	"time"
)

// zoneCookie names the time zone a reader chose for the pages' times:
// "utc", or an IANA name the script read from the browser.
const zoneCookie = "oncetrace_tz"

// zones caches the locations loaded for the cookie. Only names that load
// are kept, so the cache is bounded by the zone database however many
// different names clients send.
var zones sync.Map // string -> *time.Location

// requestZone is the zone a request's pages show times in: the cookie's
// IANA zone when it names one, else UTC. A bad cookie is no error: the
// page is still readable, and every time on it says UTC.
func requestZone(r *http.Request) *time.Location {
	c, err := r.Cookie(zoneCookie)
	if err != nil {
		return time.UTC
	}
	return loadZone(c.Value)
}

func loadZone(name string) *time.Location {
	// "Local" would be the server's zone, which the reader never chose;
	// "" loads as UTC anyway.
	if name == "" || strings.EqualFold(name, "utc") || name == "Local" || len(name) > 64 {
		return time.UTC
	}
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return time.UTC
	}
	zones.Store(name, loc)
	return loc
}
