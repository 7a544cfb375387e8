// Package schema holds the schemas pipec ships inside its binary: pipeline.cue,
// against which every CUE spec is unified before it is read (see cuespec.LoadCUE).
// Keeping the schema a real .cue file means authors can read it, and `cue vet`
// can use it, exactly as pipec does.
package schema

import _ "embed"

// PipelineCUE is the source of pipeline.cue. It is a string so that no caller
// can change it; callers compile it themselves (one compilation per load, so
// no evaluated state is shared between loads).
//
//go:embed pipeline.cue
var PipelineCUE string

// PipelineFilename is the name positions inside PipelineCUE carry, so a loader
// can tell a position in the schema from one in the author's file.
const PipelineFilename = "pipec/schema/pipeline.cue"
