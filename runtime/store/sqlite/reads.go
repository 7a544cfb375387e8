package sqlite

import (
	"context"
	"database/sql"
)

// readStmtsMax bounds the read statements a handle keeps prepared: the
// queries are constants of this package (a few are built from a fixed set
// of parts), so the bound is never reached in practice.
const readStmtsMax = 64

// readStmt is query prepared once on the read connections. SQLite parses a
// statement's text at every query that is not prepared; a worker reads its
// task's earlier attempts at every visit, and parsing was most of that read
// (about 8% of a worker's CPU). database/sql prepares a Stmt on each
// connection the first time it runs there and keeps it.
func (s *Store) readStmt(ctx context.Context, query string) (*sql.Stmt, error) {
	s.readsMu.Lock()
	defer s.readsMu.Unlock()
	if st, ok := s.reads[query]; ok {
		return st, nil
	}
	st, err := s.r.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if len(s.reads) < readStmtsMax {
		if s.reads == nil {
			s.reads = map[string]*sql.Stmt{}
		}
		s.reads[query] = st
	}
	return st, nil
}

// query is s.r.QueryContext through a prepared statement.
func (s *Store) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := s.readStmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// queryRow is s.r.QueryRowContext through a prepared statement (a failed
// prepare is reported by the unprepared query, which fails alike).
func (s *Store) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := s.readStmt(ctx, query)
	if err != nil {
		return s.r.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// prepared is the read connections through prepared statements (queryRow),
// for the helpers that read one row from a transaction or from them.
type prepared struct{ s *Store }

func (p prepared) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return p.s.queryRow(ctx, query, args...)
}
