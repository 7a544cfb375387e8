package lint

// DocURL is the address of a rule's documentation page in the repository
// (docs/rules/RULE.md), used by SARIF helpUri and the language server.
func DocURL(rule string) string {
	return "https://github.com/pipec/pipec/blob/main/docs/rules/" + rule + ".md"
}
