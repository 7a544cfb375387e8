package fence

import "testing"

func TestDecide(t *testing.T) {
	none := Held{}
	held := Held{Exists: true, Token: 7, Version: "v7"}
	for _, c := range []struct {
		name    string
		held    Held
		token   int64
		version string
		fenced  bool
		want    Outcome
	}{
		{"nothing held", none, 1, "v1", true, Accept},
		{"higher token", held, 8, "v8", true, Accept},
		{"same token, same version", held, 7, "v7", true, Idempotent},
		{"same token, other version", held, 7, "vX", true, Fenced},
		{"lower token", held, 6, "v6", true, Fenced},
		{"lower token, unfenced", held, 6, "v6", false, Accept},
		{"same publish, unfenced", held, 7, "v7", false, Idempotent},
	} {
		if got := Decide(c.held, c.token, c.version, c.fenced); got != c.want {
			t.Errorf("%s: Decide = %s, want %s", c.name, got, c.want)
		}
	}
}

func TestFencedAtGrant(t *testing.T) {
	if FencedAtGrant(5, 5) || FencedAtGrant(5, 4) || !FencedAtGrant(5, 6) {
		t.Error("FencedAtGrant must refuse exactly a token below the highest grant")
	}
}

func TestCanTransition(t *testing.T) {
	all := []State{Queued, Running, Succeeded, Failed, Unknown}
	allowed := map[[2]State]bool{
		{Queued, Running}: true, {Queued, Failed}: true, {Queued, Unknown}: true,
		{Running, Running}: true, {Running, Succeeded}: true, {Running, Failed}: true, {Running, Unknown}: true,
		{Unknown, Succeeded}: true, {Unknown, Failed}: true,
	}
	for _, from := range all {
		for _, to := range all {
			if got := CanTransition(from, to); got != allowed[[2]State{from, to}] {
				t.Errorf("CanTransition(%s, %s) = %v", from, to, got)
			}
		}
	}
}
