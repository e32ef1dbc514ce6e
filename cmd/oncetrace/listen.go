package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// listenFlags are serve's flags for its HTTP listeners (--addr and
// --otlp-addr): the Host names the server answers to, the http.Server
// timeouts, and the cap on one client's connections (docs/security.md).
type listenFlags struct {
	hosts         []string // --allowed-hosts, besides the listeners' own
	hostsFromFlag bool     // the flag was given: the environment's list is replaced

	readHeaderTimeout time.Duration
	readTimeout       time.Duration
	writeTimeout      time.Duration
	idleTimeout       time.Duration
	maxConnsPerIP     int
}

// The defaults: a request's header within 10 s and its whole body within
// 30 s (8 MiB, the body limit, at 2.3 Mbit/s), its answer within 60 s of
// its header; an idle keep-alive connection closed after 30 s.
const (
	defaultReadHeaderTimeout = 10 * time.Second
	defaultReadTimeout       = 30 * time.Second
	defaultWriteTimeout      = 60 * time.Second
	defaultIdleTimeout       = 30 * time.Second
	defaultMaxConnsPerIP     = 64
)

func (l *listenFlags) register(fs *flag.FlagSet) {
	l.hosts = splitList(os.Getenv("ONCETRACE_ALLOWED_HOSTS"))
	fs.Func("allowed-hosts", "Host names the server answers to besides its listeners' own (and localhost, 127.0.0.1 and [::1] on loopback), "+
		"comma-separated or repeated, e.g. oncetrace.example.com behind a proxy; * allows any; other Host headers get 421 (env ONCETRACE_ALLOWED_HOSTS)",
		func(v string) error {
			if !l.hostsFromFlag {
				l.hosts, l.hostsFromFlag = nil, true
			}
			l.hosts = append(l.hosts, splitList(v)...)
			return nil
		})
	fs.DurationVar(&l.readHeaderTimeout, "read-header-timeout", defaultReadHeaderTimeout, "longest wait for a request's header (0: none)")
	fs.DurationVar(&l.readTimeout, "read-timeout", defaultReadTimeout, "longest wait for a whole request, body included (0: none)")
	fs.DurationVar(&l.writeTimeout, "write-timeout", defaultWriteTimeout,
		"longest time from a request's header to the end of its answer (0: none); the live routes keep their own deadlines")
	fs.DurationVar(&l.idleTimeout, "idle-timeout", defaultIdleTimeout, "how long an idle keep-alive connection stays open (0: --read-timeout)")
	fs.IntVar(&l.maxConnsPerIP, "max-conns-per-ip", defaultMaxConnsPerIP,
		"most connections open at once from one client address (an IPv6 /64), over --addr and --otlp-addr together; more are closed at once (0: no cap)")
}

func splitList(s string) []string {
	var out []string
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// loopbackHosts are the names of a loopback listener.
var loopbackHosts = []string{"localhost", "127.0.0.1", "::1"}

// allowedHosts is the Host allowlist: --allowed-hosts, and the names each
// listener is reached by without being told: its host; the loopback names
// for a loopback one; for one on every interface (0.0.0.0, [::] or no
// host), the machine's addresses and name and the loopback names.
func (l *listenFlags) allowedHosts(addrs ...string) ([]string, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	var hosts []string
	for _, h := range l.hosts {
		if h == "*" {
			return []string{"*"}, nil
		}
		if strings.ContainsAny(h, "/@?#* \t") {
			return nil, fmt.Errorf("serve: --allowed-hosts: %q is not a host name; give a name or address such as oncetrace.example.com, without scheme or path, or * for any", h)
		}
		hosts = append(hosts, h)
	}
	for _, addr := range addrs {
		if addr == "" {
			continue
		}
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("serve: listen address %q: %w", addr, err)
		}
		ip := net.ParseIP(host)
		switch {
		case host == "" || ip != nil && ip.IsUnspecified():
			hosts = append(hosts, loopbackHosts...)
			hosts = append(hosts, machineHosts()...)
		case host == "localhost" || ip != nil && ip.IsLoopback():
			hosts = append(hosts, host)
			hosts = append(hosts, loopbackHosts...)
		default:
			hosts = append(hosts, host)
		}
	}
	slices.Sort(hosts)
	return slices.Compact(hosts), nil
}

// machineHosts are this machine's interface addresses and host name.
func machineHosts() []string {
	var hosts []string
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				hosts = append(hosts, n.IP.String())
			}
		}
	}
	if name, err := os.Hostname(); err == nil && name != "" {
		hosts = append(hosts, name)
	}
	return hosts
}

func (l *listenFlags) check() error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"read-header-timeout", l.readHeaderTimeout}, {"read-timeout", l.readTimeout}, {"write-timeout", l.writeTimeout}, {"idle-timeout", l.idleTimeout}} {
		if d.v < 0 {
			return fmt.Errorf("serve: --%s: %v is negative; give a duration such as 30s, or 0 for none", d.flag, d.v)
		}
	}
	if l.maxConnsPerIP < 0 {
		return errors.New("serve: --max-conns-per-ip: must be ≥ 0 (0: no cap)")
	}
	return nil
}

// httpServer is an http.Server for h with every timeout set.
func (l *listenFlags) httpServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.readHeaderTimeout,
		ReadTimeout:       l.readTimeout,
		WriteTimeout:      l.writeTimeout,
		IdleTimeout:       l.idleTimeout,
	}
}

// connLimiter caps the connections open at once from one client, over
// every listener it wraps, and, when total is set, from all clients
// together: a connection over either cap is closed as soon as it is
// accepted, before a byte is read, and the others are untouched. An IPv6
// client is its /64, which one host usually holds whole.
type connLimiter struct {
	perIP, total int    // 0: no cap
	totalFlag    string // the flag that sets total, for the log
	logger       *slog.Logger

	mu      sync.Mutex
	open    map[string]int
	all     int
	refused int       // since the last log line
	logged  time.Time // when that was
}

// newConnLimiter returns nil, which wraps nothing, when neither cap is set.
func newConnLimiter(perIP, total int, totalFlag string, logger *slog.Logger) *connLimiter {
	if perIP <= 0 && total <= 0 {
		return nil
	}
	return &connLimiter{perIP: max(perIP, 0), total: max(total, 0), totalFlag: totalFlag, logger: logger, open: map[string]int{}}
}

// wrap returns ln with the cap applied.
func (l *connLimiter) wrap(ln net.Listener) net.Listener {
	if l == nil {
		return ln
	}
	return &limitedListener{Listener: ln, limiter: l}
}

func (l *connLimiter) acquire(client string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	overIP := l.perIP > 0 && l.open[client] >= l.perIP
	if overIP || l.total > 0 && l.all >= l.total {
		l.refused++
		// One line every 10 s at most: a flood must not flood the log.
		if now := time.Now(); now.Sub(l.logged) >= 10*time.Second {
			if overIP {
				l.logger.Warn("connections refused: a client is over --max-conns-per-ip", "client", client, "max", l.perIP, "refused", l.refused)
			} else {
				l.logger.Warn("connections refused: over --"+l.totalFlag, "client", client, "max", l.total, "refused", l.refused)
			}
			l.refused, l.logged = 0, now
		}
		return false
	}
	l.open[client]++
	l.all++
	return true
}

func (l *connLimiter) release(client string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all--
	if l.open[client]--; l.open[client] <= 0 {
		delete(l.open, client)
	}
}

// clientKey is what the cap counts by: an IPv4 address, or an IPv6 /64.
func clientKey(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	if ip4 := tcp.IP.To4(); ip4 != nil {
		return ip4.String()
	}
	return tcp.IP.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

type limitedListener struct {
	net.Listener
	limiter *connLimiter
}

// Accept returns the next connection within the cap, closing the others.
func (ln *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		client := clientKey(c.RemoteAddr())
		if ln.limiter.acquire(client) {
			return &limitedConn{Conn: c, limiter: ln.limiter, client: client}, nil
		}
		c.Close()
	}
}

// limitedConn gives its place back when it is closed, by http.Server or,
// once hijacked, by the WebSocket.
type limitedConn struct {
	net.Conn
	limiter *connLimiter
	client  string
	once    sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.limiter.release(c.client) })
	return err
}
