package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgxlisten"

	"github.com/oncetrace/oncetrace/store"
)

// Listen delivers the notice of every commit any instance makes on the
// database to fn, in commit order, until ctx ends; it reconnects after a
// lost connection. Notices sent while it was not connected are lost, so on
// every (re)connect it calls fn with a Partial notice of Seq 0: the
// caller then reads the store for whatever it has not seen. fn runs on
// the listener's goroutine and must not block.
func Listen(ctx context.Context, dsn string, fn func(store.Notice), logError func(error)) error {
	l := &pgxlisten.Listener{
		Connect:        func(ctx context.Context) (*pgx.Conn, error) { return pgx.Connect(ctx, dsn) },
		ReconnectDelay: time.Second,
		LogError: func(_ context.Context, err error) {
			if logError != nil {
				logError(err)
			}
		},
	}
	l.Handle(Channel, noticeHandler{fn: fn, logError: logError})
	err := l.Listen(ctx)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

type noticeHandler struct {
	fn       func(store.Notice)
	logError func(error)
}

func (h noticeHandler) HandleNotification(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
	notice, err := store.ParseNotice(n.Payload)
	if err != nil {
		// Still a commit: read the store for it.
		notice = store.Notice{Partial: true}
	}
	h.fn(notice)
	return nil
}

// HandleBacklog runs once LISTEN is in place, after a (re)connect.
func (h noticeHandler) HandleBacklog(context.Context, string, *pgx.Conn) error {
	h.fn(store.Notice{Partial: true})
	return nil
}
