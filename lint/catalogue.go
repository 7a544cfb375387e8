package lint

// catalogue is every rule, one per rule_<id>.go file. It is read, never
// written; All and Lookup hand out copies.
var catalogue = []*Rule{
	&ruleSyntax,
	&ruleSchema,
	&ruleCycle,
	&ruleMissingDependency,
	&ruleMissingArtifact,
	&ruleDuplicateProducer,
	&ruleSinkConflict,
	&ruleInputVariableCollision,
	&ruleBypassedValidation,
	&ruleEmptyCheck,
	&ruleRetryDeterministic,
	&ruleUnboundedRetry,
	&ruleRetryStorm,
	&ruleNonIdempotentRetry,
	&ruleUnfencedSink,
	&ruleIntervalMismatch,
	&ruleLocalArtifact,
	&ruleCatchupStampede,
	&ruleSecretLiteral,
	&ruleHeartbeatLease,
	&ruleFailoverLimits,
	&ruleUnusedArtifact,
	&ruleUnusedSuppression,
	&ruleSuppressionReason,
}
