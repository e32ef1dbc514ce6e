package mcptest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPPath is where ServeHTTP serves the MCP endpoint.
const HTTPPath = "/mcp"

// HTTPHandler serves server over the SDK's Streamable HTTP transport with
// stateful sessions (Mcp-Session-Id), answering calls with SSE streams.
// It is for tests that wrap the handler; ServeHTTP serves it.
func HTTPHandler(server *mcp.Server) http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
}

// ServeHTTP serves NewServer(opts) over Streamable HTTP on addr (such as
// "127.0.0.1:0") at HTTPPath. url is the MCP endpoint; stop closes the
// server's sessions and connections and waits for the HTTP server.
func ServeHTTP(addr string, opts ServerOptions) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("mcptest: listen: %w", err)
	}
	server := NewServer(opts)
	mux := http.NewServeMux()
	mux.Handle(HTTPPath, HTTPHandler(server))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && opts.Logger != nil {
			opts.Logger.Error("mcptest: serve", "err", err)
		}
	}()
	stop = func() {
		for ss := range server.Sessions() {
			ss.Close()
		}
		hs.Close()
		<-done
	}
	return "http://" + ln.Addr().String() + HTTPPath, stop, nil
}

// ServeStdio serves NewServer(opts) on stdin and stdout, one session,
// until the client closes stdin or ctx ends. It is what the mcpserver
// command runs by default.
func ServeStdio(ctx context.Context, opts ServerOptions) error {
	if err := NewServer(opts).Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
		return fmt.Errorf("mcptest: serve stdio: %w", err)
	}
	return nil
}
