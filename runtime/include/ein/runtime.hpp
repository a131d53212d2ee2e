// The ein runtime's C++ API in one include: load an artifact (Model), run it
// from any number of threads (Runner), own one execution context (Session) or
// many sequences of a decoder (SequencePool), read the results. See ein/ein.h for the C API.
#pragma once

#include "ein/describe.hpp"
#include "ein/beam_search.hpp"
#include "ein/generate.hpp"
#include "ein/half_float.hpp"
#include "ein/model.hpp"
#include "ein/runner.hpp"
#include "ein/scheduler.hpp"
#include "ein/sequence_pool.hpp"
#include "ein/session.hpp"
#include "ein/status.hpp"
#include "ein/types.hpp"
