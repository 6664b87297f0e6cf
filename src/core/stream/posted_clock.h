/*
 * When this thread's latest call reached the GPU's hands, for LOOM_PROFILE's
 * "to GPU" phase (coll_loom_profile.h): the host clock (CLOCK_MONOTONIC) as
 * a one-shot call's kernel launch returned or its mailbox line went to the
 * resident kernel. The paths that mark it are those issue 45 compares
 * (launched vs launch-free small calls); other calls leave it alone, and
 * the profile shows 0 for them. Without LOOM_PROFILE: one branch.
 */
#pragma once

namespace loom {

// Steps of a call on its way to the GPU, before the post, that LOOM_PROFILE
// splits "to GPU" into: the call's checks and its ordering after earlier
// work begin (checkComm), the choice of algorithm made (choose), the
// resident kernel's eligibility asked (residentEligible: the legacy-stream
// query). Order of the enum: order in a call.
enum PostStep { kStepCalled, kStepChecked, kStepChosen, kStepEligible, kPostSteps };

// Marks now as this thread's latest post (a no-op unless LOOM_PROFILE=1).
void notePosted();
// Marks now as this thread's latest `step` (a no-op unless LOOM_PROFILE=1).
void notePostStep(PostStep step);

} // namespace loom
