package config

import (
	"regexp"
	"strconv"
	"strings"
)

// yamlLine finds the line number in a yaml/v3 error ("yaml: line 3: ..."),
// which carries no structured position.
var yamlLine = regexp.MustCompile(`line (\d+)`)

func yamlErrorLine(err error) int {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		if n, e := strconv.Atoi(m[1]); e == nil && n > 0 {
			return n
		}
	}
	return 1
}

// yamlErrorText is the error without the "yaml: line N:" prefix, which the
// diagnostic's position already says.
func yamlErrorText(err error) string {
	s := strings.TrimPrefix(err.Error(), "yaml: ")
	if m := yamlLine.FindStringIndex(s); m != nil && m[0] == 0 {
		s = strings.TrimLeft(s[m[1]:], ": ")
	}
	return "the configuration is not valid YAML: " + s
}
