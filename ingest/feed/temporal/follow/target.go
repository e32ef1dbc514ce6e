package follow

import (
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// DefaultNamespace is the namespace of a target that names none.
const DefaultNamespace = "default"

// maxNamespaceBytes is Temporal's own limit on a namespace name.
const maxNamespaceBytes = 255

// Target is one cluster and namespace to follow.
type Target struct {
	HostPort  string // the frontend's gRPC address
	Namespace string
	// TLS, when set, is the connection's TLS configuration; nil is
	// plaintext.
	TLS *tls.Config
	// APIKey, when set, is sent as Authorization: Bearer on every call.
	APIKey string
}

// String is HOST:PORT/NAMESPACE, the target's name in the status.
func (t Target) String() string { return t.HostPort + "/" + t.Namespace }

// ParseTarget reads HOST:PORT[/NAMESPACE]; the namespace defaults to
// "default".
func ParseTarget(s string) (Target, error) {
	hostPort, ns, hasNS := strings.Cut(s, "/")
	if hasNS && ns == "" {
		return Target{}, fmt.Errorf("%q: the namespace after / is empty (leave out the / for %q)", s, DefaultNamespace)
	}
	if !hasNS {
		ns = DefaultNamespace
	}
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return Target{}, fmt.Errorf("%q: want HOST:PORT[/NAMESPACE], e.g. 127.0.0.1:7233/default: %v", s, err)
	}
	if host == "" {
		return Target{}, fmt.Errorf("%q: the host is empty", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return Target{}, fmt.Errorf("%q: port %q is not a number from 1 to 65535", s, port)
	}
	if len(ns) > maxNamespaceBytes {
		return Target{}, fmt.Errorf("%q: namespace of %d bytes, over the limit of %d", s, len(ns), maxNamespaceBytes)
	}
	if strings.ContainsAny(ns, "/ \t\r\n") {
		return Target{}, fmt.Errorf("%q: namespace %q contains a slash or a space", s, ns)
	}
	return Target{HostPort: hostPort, Namespace: ns}, nil
}
