// Package views holds oncetrace's templ components and the view models they
// render: pages shaped like the screen, built from trace types. It knows
// nothing of HTTP or SQL; web builds the models and renders the pages.
package views
