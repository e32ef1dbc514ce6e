package views

import "context"

type signedInKey struct{}

// WithSignedIn marks a request's context as carrying a login session, so
// the layout offers to log out.
func WithSignedIn(ctx context.Context) context.Context {
	return context.WithValue(ctx, signedInKey{}, true)
}

func signedIn(ctx context.Context) bool {
	v, _ := ctx.Value(signedInKey{}).(bool)
	return v
}

// LoginView is the login form's model.
type LoginView struct {
	Next  string // where to go afterwards: a path of this server
	Error string // why the last try failed, if it did
}
