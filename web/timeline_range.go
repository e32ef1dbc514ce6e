package web

import (
	"math"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oncetrace/oncetrace/views"
)

// maxRangeSeconds bounds from and to: a week, far beyond any execution,
// and far inside what a time.Duration holds.
const maxRangeSeconds = 7 * 24 * 3600

// timelineRange reads the execution page's zoom: from and to, seconds
// since the execution's start with up to millisecond decimals ("12.5").
// Either may be left out (from the start, to the end); a value that is not
// a finite number in [0, a week], or a to not after from, is a 400 naming
// the parameter.
func timelineRange(c echo.Context) (views.TimeRange, error) {
	var r views.TimeRange
	parse := func(name string) (time.Duration, bool, error) {
		raw := c.QueryParam(name)
		if raw == "" {
			return 0, false, nil
		}
		v, err := strconv.ParseFloat(raw, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > maxRangeSeconds {
			return 0, false, badQuery(name + ": must be seconds since the execution's start, a number from 0 to " +
				strconv.Itoa(maxRangeSeconds) + " such as 12.5; got " + strconv.Quote(raw))
		}
		return time.Duration(math.Round(v*1000)) * time.Millisecond, true, nil
	}
	from, _, err := parse("from")
	if err != nil {
		return r, err
	}
	to, hasTo, err := parse("to")
	if err != nil {
		return r, err
	}
	if hasTo && to <= from {
		return r, badQuery("to: must be after from (" + c.QueryParam("from") + " s); got " + strconv.Quote(c.QueryParam("to")))
	}
	return views.TimeRange{From: from, To: to}, nil
}
