package web

import "github.com/labstack/echo/v4"

// RoutesOf lists a server's routes, for the tests that must cover every
// one (web/hardening_test.go).
func RoutesOf(s *Server) []*echo.Route { return s.echo.Routes() }

// WriteContentTypes is hardening.go's table of the types each write route
// accepts, by "METHOD path".
func WriteContentTypes() map[string][]string { return writeContentTypes }
