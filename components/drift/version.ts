// The ToolkitState provider's version. `pulumi refresh` runs the provider code stored in state at
// the last create/update (pulumi#6490); diff reports a change when this differs, so the next
// `pulumi up` runs update with the new code and later refreshes use it. Bump it when the probe,
// the drift rules or the state layout change.
// 2: the `repairs` input and onDrift "repair" (update repairs drift instead of only failing).
// 3: the API key file (apiKey/apiKeyFile inputs, observed.apiKeyFile, repair steps with stdin).
// 4: the key the active service runs with (observed.apiKeyRunning, apiKeyFile.credential) and
//    repairActivation (the start a repair made, which VerifiedGeneration verifies).
// 5: the serving venv's CUDA wheels (expected.venvPath, observed.venvWheels, venv.wheels.* drift).
export const TOOLKIT_STATE_PROVIDER_VERSION = "5";
