package lint

import (
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode"

	"github.com/pipec/pipec/diag"
)

var ruleSecretLiteral = Rule{
	ID:       "secret-literal",
	Severity: diag.Error,
	Doc: `a literal that looks like a credential in the spec

A literal that looks like a credential: an env variable named like a password,
token, secret or API key with a literal value; an AWS access key id (AKIA...);
a GitHub or Slack token; a private key header; a URL with user:password; or a
command flag such as --password=... with a literal value.

A spec is committed, reviewed, copied into plans and printed in logs: a
credential in it is leaked. Pass secrets by name with secret_env (pipec reads
them from its own environment and redacts their values everywhere) or let the
task read them from a secret store. References such as "$DB_PASSWORD" or
"${DB_PASSWORD}" (written "$${DB_PASSWORD}" in HCL) are not reported; neither are the names
listed in secret_env. The message never repeats the value.

Bad:

    pipeline "orders" {
      task "load" {
        command = ["./load.sh", "postgres://loader:hunter2@db/orders"]
        env     = { WAREHOUSE_PASSWORD = "hunter2" }
      }
    }

Fixed:

    pipeline "orders" {
      task "load" {
        command    = ["./load.sh", "postgres://loader@db/orders"]
        secret_env = ["WAREHOUSE_PASSWORD"]
      }
    }
`,
	Run: runSecretLiteral,
}

// secretRx holds the shapes of credentials, compiled on first use: every
// pipec command links this package, and most never lint.
var secretRx = sync.OnceValue(func() *secretRegexps {
	return &secretRegexps{
		awsKeyID:   regexp.MustCompile(`\b(AKIA|ASIA)[0-9A-Z]{16}\b`),
		privateKey: regexp.MustCompile(`-----BEGIN ([A-Z0-9]+ )*PRIVATE KEY( BLOCK)?-----`),
		ghToken:    regexp.MustCompile(`\b(gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{22,})\b`),
		slackToken: regexp.MustCompile(`\bxox[abprs]-[A-Za-z0-9-]{10,}`),
		urlCreds:   regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+:([^/\s@]+)@`),
		secretFlag: regexp.MustCompile(`^--?[A-Za-z0-9_-]*?(password|passwd|token|secret|api[-_]?key)$`),
	}
})

type secretRegexps struct {
	awsKeyID, privateKey, ghToken, slackToken, urlCreds, secretFlag *regexp.Regexp
}

func runSecretLiteral(pass *Pass) error {
	ix := pass.Index
	for _, t := range ix.TaskList {
		for _, k := range sortedKeys(t.Env) {
			r := t.At("env."+k, t.At("env", t.Range))
			v := t.Env[k]
			if secretKey(k) && isLiteral(v) {
				pass.Reportf(r, "task %q sets %s to a literal value: a credential in the spec ends up in version control and logs; remove it from env, list %q in secret_env and set it in pipec's environment",
					t.Name, k, k)
				continue
			}
			if shape := credentialShape(v); shape != "" {
				pass.Reportf(r, "task %q sets %s to a literal that contains %s: a credential in the spec ends up in version control and logs; pass it with secret_env", t.Name, k, shape)
			}
		}
		if shape := argsShape(t.Command); shape != "" {
			pass.Reportf(t.At("command", t.Range), "task %q has %s in its command: a credential in the spec ends up in version control and logs; read it from a variable listed in secret_env", t.Name, shape)
		}
	}
	for i := range pass.Spec.Checks {
		c := &pass.Spec.Checks[i]
		if shape := argsShape(c.Command); shape != "" {
			pass.Reportf(c.At("command", c.Range), "check %q has %s in its command: a credential in the spec ends up in version control and logs; read it from the environment", c.Name, shape)
		}
	}
	for i := range pass.Spec.Errors {
		e := &pass.Spec.Errors[i]
		for _, m := range e.Match {
			if shape := credentialShape(m); shape != "" {
				pass.Reportf(e.At("match", e.Range), "error class %q matches on %s: a credential in the spec ends up in version control and logs; match on a part of the message that is not secret", e.Name, shape)
				break
			}
		}
	}
	for i := range pass.Spec.Sinks {
		s := &pass.Spec.Sinks[i]
		if shape := credentialShape(s.Path); shape != "" {
			pass.Reportf(s.At("path", s.Range), "sink %q has %s in its path: a credential in the spec ends up in version control and logs; configure the sink's credentials outside the spec", s.Name, shape)
		}
	}
	return nil
}

// argsShape finds a credential in a command: in any argument, as --flag=value,
// or as a value after a flag such as --password.
func argsShape(args []string) string {
	rx := secretRx()
	for i, a := range args {
		if shape := credentialShape(a); shape != "" {
			return shape
		}
		flag, v, hasValue := strings.Cut(a, "=")
		if !rx.secretFlag.MatchString(flag) {
			continue
		}
		if !hasValue && i+1 < len(args) {
			v, hasValue = args[i+1], !strings.HasPrefix(args[i+1], "-")
		}
		if hasValue && isLiteral(v) {
			return "a literal value for " + flag
		}
	}
	return ""
}

// credentialShape names the kind of credential found in s, or returns "".
func credentialShape(s string) string {
	rx := secretRx()
	switch {
	case rx.awsKeyID.MatchString(s):
		return "an AWS access key id"
	case rx.privateKey.MatchString(s):
		return "a private key"
	case rx.ghToken.MatchString(s):
		return "a GitHub token"
	case rx.slackToken.MatchString(s):
		return "a Slack token"
	}
	for _, m := range rx.urlCreds.FindAllStringSubmatch(s, -1) {
		if isLiteral(m[1]) {
			return "a URL with a password"
		}
	}
	return ""
}

// isLiteral reports whether a value is written out rather than referenced:
// not empty and with no $VAR or ${VAR} in it.
func isLiteral(v string) bool {
	v = strings.TrimSpace(v)
	return v != "" && !strings.Contains(v, "$")
}

// secretKey reports whether an env name says it holds a credential: its last
// word is password, secret, token, ... or it ends in api_key, access_key and
// the like. PWD (the working directory) and TOKEN_TTL are not.
func secretKey(name string) bool {
	words := splitWords(name)
	if len(words) == 0 {
		return false
	}
	last := words[len(words)-1]
	switch last {
	case "password", "passwd", "pass", "passphrase", "secret", "token", "credential", "credentials", "apikey", "pat":
		return true
	case "key":
		if len(words) > 1 {
			return slices.Contains([]string{"api", "access", "secret", "private", "auth", "signing", "encryption", "master", "license"}, words[len(words)-2])
		}
	}
	return false
}

// splitWords splits SNAKE_CASE, kebab-case, dotted and camelCase names into
// lower-case words.
func splitWords(s string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(s)
	for i, r := range rs {
		switch {
		case r == '_' || r == '-' || r == '.':
			flush()
		case unicode.IsUpper(r) && i > 0 && unicode.IsLower(rs[i-1]):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
	}
	flush()
	return words
}
