// Package pgtest gives tests a throwaway PostgreSQL cluster: Debian's
// initdb and pg_ctl in a temporary directory, on a free 127.0.0.1 port,
// with one fresh database per test. With ONCETRACE_TEST_POSTGRES set to a
// postgres:// URL it uses that server instead and starts nothing.
//
// A package's TestMain starts one cluster and stops it after m.Run:
//
//	var cluster *pgtest.Cluster
//
//	func TestMain(m *testing.M) {
//		c, err := pgtest.Start()
//		if err != nil && (pgtest.Required() || !errors.Is(err, pgtest.ErrUnavailable)) {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//		cluster = c // nil when unavailable: NewDatabase then skips the test
//		code := m.Run()
//		cluster.Stop()
//		os.Exit(code)
//	}
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names a server to use instead of starting one; its user must be
// allowed to CREATE DATABASE.
const EnvURL = "ONCETRACE_TEST_POSTGRES"

// EnvRequire, set to 1 (as CI does), turns "PostgreSQL is not available
// here" from a skip into a failure.
const EnvRequire = "ONCETRACE_REQUIRE_POSTGRES"

// superuser is the cluster's superuser; it owns every test database.
const superuser = "oncetrace"

// ErrUnavailable is wrapped by Start and Available when this machine has no
// PostgreSQL to start (and EnvURL is unset).
var ErrUnavailable = errors.New("pgtest: PostgreSQL is not available")

// Cluster is a PostgreSQL server for tests: one started here, or the one
// EnvURL names.
type Cluster struct {
	admin *url.URL // the maintenance database, for CREATE and DROP DATABASE
	// Set only for a cluster started here.
	dir    string // removed by Stop: data/, the socket, the server log
	pgCtl  string
	asUser string // run pg_ctl as this user (we are root); "" runs it directly
	opts   string // the server's options, its port among them, for Resume
}

// Required reports whether EnvRequire asks for PostgreSQL tests to fail
// rather than skip when no server can be had.
func Required() bool { return os.Getenv(EnvRequire) == "1" }

// Available says whether Start can work here: nil when EnvURL is set or
// initdb and pg_ctl are installed (and, for root, the postgres user that
// runs them exists); otherwise an error wrapping ErrUnavailable that says
// what to install.
func Available() error {
	if os.Getenv(EnvURL) != "" {
		return nil
	}
	if _, _, err := findBinaries(); err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			return fmt.Errorf("%w: running as root, PostgreSQL must run as user postgres, which does not exist (apt-get install postgresql creates it)", ErrUnavailable)
		}
	}
	return nil
}

// Start returns the server EnvURL names, or initialises and starts a new
// cluster that Stop removes.
func Start() (*Cluster, error) {
	if raw := os.Getenv(EnvURL); raw != "" {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			return nil, fmt.Errorf("pgtest: %s must be a postgres:// URL, not %q", EnvURL, raw)
		}
		c := &Cluster{admin: u}
		if err := c.ping(); err != nil {
			return nil, fmt.Errorf("pgtest: %s: %w", EnvURL, err)
		}
		return c, nil
	}
	if err := Available(); err != nil {
		return nil, err
	}
	initdb, pgCtl, _ := findBinaries()
	c := &Cluster{pgCtl: pgCtl}
	if os.Geteuid() == 0 {
		c.asUser = "postgres" // postgres refuses to run as root
	}
	var err error
	if c.dir, err = c.makeDir(); err != nil {
		return nil, err
	}
	if err := c.initdb(initdb); err != nil {
		os.RemoveAll(c.dir)
		return nil, err
	}
	// The free port is found by binding it and letting go, so another
	// process may take it before postgres does; try another then.
	for try := 1; ; try++ {
		err = c.start()
		if err == nil {
			return c, nil
		}
		if try == 3 {
			os.RemoveAll(c.dir)
			return nil, err
		}
	}
}

// Stop stops a cluster Start started, at once, and removes its directory.
// A cluster from EnvURL, or a nil one, is left alone.
func (c *Cluster) Stop() {
	if c == nil || c.dir == "" {
		return
	}
	// Immediate: nothing in a test cluster needs a clean shutdown.
	_, _ = c.run(c.pgCtl, "-D", filepath.Join(c.dir, "data"), "-m", "immediate", "-w", "stop")
	os.RemoveAll(c.dir)
}

var databases atomic.Int64

// NewDatabase creates an empty database for tb and returns its postgres://
// URL; it is dropped, with any connections still open to it, when tb
// finishes. On a nil Cluster (PostgreSQL unavailable) it skips tb, or fails
// it when Required.
func (c *Cluster) NewDatabase(tb testing.TB) string {
	tb.Helper()
	if c == nil {
		reason := Available()
		if reason == nil {
			reason = errors.New("pgtest: no cluster was started (TestMain did not call Start, or it failed)")
		}
		if Required() {
			tb.Fatalf("%v (%s=1)", reason, EnvRequire)
		}
		tb.Skipf("%v; set %s to a server's URL or install postgresql", reason, EnvURL)
	}
	// The pid keeps concurrent test processes on one server (EnvURL) apart.
	name := fmt.Sprintf("t_%d_%d_%d", os.Getpid(), databases.Add(1), time.Now().UnixNano()%1e6)
	dsn, drop, err := c.CreateDatabase(name)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := drop(); err != nil {
			tb.Error(err)
		}
	})
	return dsn
}

// CreateDatabase is NewDatabase for a program rather than a test (oncebench
// compares the engines with it): it creates the empty database name and
// returns its postgres:// URL and a function that drops it, with any
// connections still open to it.
func (c *Cluster) CreateDatabase(name string) (dsn string, drop func() error, err error) {
	ident := pgx.Identifier{name}.Sanitize()
	// template0 with C collation and UTF-8, whatever the server's default:
	// the schema asks for C collation itself, but tests should not depend
	// on the locale of the server they run on.
	if err := c.admin1(`CREATE DATABASE ` + ident + ` TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'`); err != nil {
		return "", nil, fmt.Errorf("pgtest: create database %s: %w", name, err)
	}
	drop = func() error {
		if err := c.admin1(`DROP DATABASE IF EXISTS ` + ident + ` WITH (FORCE)`); err != nil {
			return fmt.Errorf("pgtest: drop database %s: %w", name, err)
		}
		return nil
	}
	u := *c.admin
	u.Path = "/" + name
	q := u.Query()
	if q.Get("sslmode") == "" && c.dir != "" {
		q.Set("sslmode", "disable")
	}
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}

// admin1 runs one statement in the maintenance database.
func (c *Cluster) admin1(sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.admin.String())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

func (c *Cluster) ping() error { return c.admin1(`SELECT 1`) }

// Exec runs one statement in the maintenance database as the superuser,
// for a test that acts as an administrator (pg_terminate_backend).
func (c *Cluster) Exec(sql string) error { return c.admin1(sql) }

// Halt stops a cluster Start started the way an administrator's restart
// does (fast: every connection is cut, the data stays); Resume starts it
// again on the same port. Fault tests use them.
func (c *Cluster) Halt() error {
	if c.dir == "" {
		return errors.New("pgtest: Halt needs a cluster started here, not " + EnvURL)
	}
	if out, err := c.run(c.pgCtl, "-D", filepath.Join(c.dir, "data"), "-m", "fast", "-w", "-t", "60", "stop"); err != nil {
		return fmt.Errorf("pgtest: pg_ctl stop: %w\n%s", err, out)
	}
	return nil
}

// Resume starts a cluster Halt stopped, and waits until it takes
// connections.
func (c *Cluster) Resume() error {
	if c.dir == "" {
		return errors.New("pgtest: Resume needs a cluster started here, not " + EnvURL)
	}
	// -l: the server's output goes to a file, not to pipes we wait on.
	out, err := c.run(c.pgCtl, "-D", filepath.Join(c.dir, "data"), "-l", filepath.Join(c.dir, "log"),
		"-o", c.opts, "-w", "-t", "60", "start")
	if err != nil {
		serverLog, _ := os.ReadFile(filepath.Join(c.dir, "log"))
		return fmt.Errorf("pgtest: pg_ctl start: %w\n%s\n%s", err, out, serverLog)
	}
	return nil
}

// Freeze stops every process of a cluster Start started with SIGSTOP, as
// a hung machine or a paused container would: connections stay open and
// nothing answers. Thaw sends SIGCONT. Linux only (it reads /proc).
func (c *Cluster) Freeze() error { return c.signalAll(syscall.SIGSTOP) }

// Thaw resumes a cluster Freeze stopped.
func (c *Cluster) Thaw() error { return c.signalAll(syscall.SIGCONT) }

// signalAll signals the postmaster and every process it started.
func (c *Cluster) signalAll(sig syscall.Signal) error {
	if c.dir == "" {
		return errors.New("pgtest: signals need a cluster started here, not " + EnvURL)
	}
	data, err := os.ReadFile(filepath.Join(c.dir, "data", "postmaster.pid"))
	if err != nil {
		return fmt.Errorf("pgtest: the postmaster's pid: %w", err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	postmaster, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return fmt.Errorf("pgtest: postmaster.pid: %w", err)
	}
	pids := []int{postmaster}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return fmt.Errorf("pgtest: list processes: %w", err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after ')'.
		_, rest, ok := strings.Cut(string(stat), ") ")
		fields := strings.Fields(rest)
		if ok && len(fields) > 1 && fields[1] == strconv.Itoa(postmaster) {
			pids = append(pids, pid)
		}
	}
	// The postmaster first on SIGSTOP, so that it starts no new child.
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("pgtest: kill -%d %d: %w", sig, pid, err)
		}
	}
	return nil
}

// Restart is Halt then Resume.
func (c *Cluster) Restart() error {
	if err := c.Halt(); err != nil {
		return err
	}
	return c.Resume()
}

// findBinaries finds initdb and pg_ctl: the newest of Debian's
// /usr/lib/postgresql/<version>/bin, else on PATH.
func findBinaries() (initdb, pgCtl string, err error) {
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	version := func(p string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(filepath.Dir(p))), 64)
		return v
	}
	sort.Slice(found, func(i, j int) bool { return version(found[i]) > version(found[j]) })
	for _, p := range found {
		ctl := filepath.Join(filepath.Dir(p), "pg_ctl")
		if _, err := os.Stat(ctl); err == nil {
			return p, ctl, nil
		}
	}
	initdb, err1 := exec.LookPath("initdb")
	pgCtl, err2 := exec.LookPath("pg_ctl")
	if err1 == nil && err2 == nil {
		return initdb, pgCtl, nil
	}
	return "", "", fmt.Errorf("%w: no initdb and pg_ctl in /usr/lib/postgresql/*/bin or on PATH (apt-get install postgresql)", ErrUnavailable)
}

// makeDir makes the cluster's directory, owned by the user postgres will
// run as, somewhere that user can reach.
func (c *Cluster) makeDir() (string, error) {
	parent := os.TempDir()
	if c.asUser != "" && !reachableByAll(parent) {
		parent = "/tmp"
	}
	dir, err := os.MkdirTemp(parent, "oncetrace-pg-")
	if err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	if c.asUser != "" {
		u, err := user.Lookup(c.asUser)
		if err == nil {
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			err = os.Chown(dir, uid, gid)
		}
		if err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("pgtest: give %s to user %s: %w", dir, c.asUser, err)
		}
	}
	return dir, nil
}

// reachableByAll reports whether every directory from / to dir may be
// entered by any user.
func reachableByAll(dir string) bool {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

func (c *Cluster) initdb(initdb string) error {
	// --no-sync: a test cluster need not survive a machine crash, and
	// syncing its files is most of initdb's time. C locale: see NewDatabase.
	out, err := c.run(initdb, "-D", filepath.Join(c.dir, "data"), "-U", superuser, "--auth=trust",
		"-E", "UTF8", "--no-locale", "--no-sync", "--no-instructions")
	if err != nil {
		return fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	return nil
}

// start starts the server on a free port and points c.admin at it.
func (c *Cluster) start() error {
	port, err := freePort()
	if err != nil {
		return err
	}
	// fsync and full_page_writes off make commits cheap: a test kills
	// oncetrace (the SIGKILL durability test), never the machine, and what
	// postgres has written survives in the page cache. synchronous_commit
	// stays on, so an acknowledged commit has reached the kernel even if
	// postgres itself is killed. max_connections: several packages' tests
	// each open pools of a few connections to several databases at once.
	c.opts = strings.Join([]string{
		"-k", c.dir, "-h", "127.0.0.1", "-p", strconv.Itoa(port),
		"-c", "fsync=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200", "-c", "shared_buffers=32MB",
	}, " ")
	if err := c.Resume(); err != nil {
		// A server that came up is stopped; one that failed is not ours to keep.
		_, _ = c.run(c.pgCtl, "-D", filepath.Join(c.dir, "data"), "-m", "immediate", "-w", "stop")
		return err
	}
	c.admin = &url.URL{
		Scheme:   "postgres",
		User:     url.User(superuser),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Path:     "/postgres",
		RawQuery: "sslmode=disable",
	}
	return nil
}

// run runs a PostgreSQL program, as c.asUser when that is set.
func (c *Cluster) run(name string, args ...string) ([]byte, error) {
	if c.asUser != "" {
		args = append([]string{"-u", c.asUser, "--", name}, args...)
		name = "runuser"
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = c.dir // the working directory must be one the user can enter
	// initdb takes its locale from the environment otherwise.
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	return cmd.CombinedOutput()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
