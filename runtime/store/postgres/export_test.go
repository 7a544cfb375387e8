package postgres

// MigrationSQL is the statement of the named migration, for tests that play
// one step on data written as before it.
func MigrationSQL(name string) string {
	for _, m := range migrations {
		if m.name == name {
			return m.sql
		}
	}
	return ""
}
