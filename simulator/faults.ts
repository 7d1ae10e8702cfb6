import { z } from "zod";

/**
 * The failures the story (docs/story.md) lived through, by the names used on the command line (`--fault NAME`)
 * and in profiles (`faults: [NAME]`). Each one is a behaviour a readiness gate or benchmark must
 * notice; none of them is a crash of the simulator itself.
 */
export const FAULTS = {
  "late-port": "the port opens late (by default only once the model is loaded: connection refused for the whole load)",
  "models-before-ready":
    "/v1/models answers from the first second while the model still loads; chat requests hang until it has",
  "jit-crash":
    "the first client generation prints 'fatal error: curand.h: No such file or directory' and the process exits non-zero",
  "oom-at-load": "CUDA out of memory while loading the weights: message on stderr, process exits non-zero",
  "slow-first-request":
    "the first client generation stalls the scheduler for a JIT compile (health checks time out meanwhile)",
  "thinking-budget":
    "with thinking on, reasoning never ends: it spends all of max_tokens, content empty, finish_reason length",
  "reset-mid-stream": "generations are cut by a TCP reset after a number of tokens (streams end without [DONE])",
  "overload-500": "HTTP 500 for new generation requests while running+queued requests are at or above a threshold",
  silent: "accepts connections and reads requests but never answers anything, /health included",
  "garbled-answers":
    "answers come out as other words than the model's (as after a kernel, weights or parser change): the same greedy prompt no longer gets the same answer",
  "wrong-answers":
    "the answer set's prompts get fluent wrong answers (another prompt's right answer), with correct usage and counters: the answer check fails",
  "speculative-divergence":
    "speculative services: every other prompt of the answer set gets another answer than the plain model's (a draft or verify kernel that changes greedy output)",
  "acceptance-collapse":
    "speculative services: the draft's tokens are never accepted, one token per verify step in generation, /server_info and /metrics",
} as const;

export type FaultName = keyof typeof FAULTS;
export const FAULT_NAMES = Object.keys(FAULTS) as [FaultName, ...FaultName[]];
export const faultNameSchema = z.enum(FAULT_NAMES);

/** Knobs of each fault, with defaults; a profile may override them under `faultSettings`. */
export const faultSettingsSchema = z
  .object({
    latePort: z
      .object({
        delaySeconds: z
          .number()
          .nonnegative()
          .nullable()
          .default(null)
          .describe("simulated seconds after start at which the port opens; null: when loading (and warmup) finish"),
      })
      .prefault({})
      .describe("late-port"),
    modelsBeforeReady: z
      .object({
        generationWhileLoading: z
          .enum(["hang", "503"])
          .default("hang")
          .describe("what a generation request sent while loading gets: held until the model is loaded, or HTTP 503"),
      })
      .prefault({})
      .describe("models-before-ready"),
    jitCrash: z
      .object({
        compileSeconds: z
          .number()
          .nonnegative()
          .default(4)
          .describe("simulated seconds the doomed compile runs before the process dies"),
        exitCode: z.number().int().min(1).max(255).default(1).describe("exit status of the dying process"),
      })
      .prefault({})
      .describe("jit-crash"),
    oomAtLoad: z
      .object({
        atLoadFraction: z
          .number()
          .min(0)
          .max(1)
          .default(0.6)
          .describe("fraction of the load time at which the allocation fails"),
        exitCode: z.number().int().min(1).max(255).default(1).describe("exit status of the dying process"),
      })
      .prefault({})
      .describe("oom-at-load"),
    slowFirstRequest: z
      .object({
        compileSeconds: z
          .number()
          .nonnegative()
          .default(90)
          .describe("simulated seconds the first generation stalls the scheduler"),
      })
      .prefault({})
      .describe("slow-first-request"),
    resetMidStream: z
      .object({
        afterTokens: z
          .number()
          .int()
          .min(1)
          .default(32)
          .describe("tokens a request generates before its connection is reset"),
        everyNth: z
          .number()
          .int()
          .min(1)
          .default(1)
          .describe("reset only client generations whose sequence number is a multiple of this"),
      })
      .prefault({})
      .describe("reset-mid-stream"),
    overload500: z
      .object({
        threshold: z
          .number()
          .int()
          .min(0)
          .default(16)
          .describe("running+queued generation requests at or above which new ones get HTTP 500"),
      })
      .prefault({})
      .describe("overload-500"),
  })
  .prefault({});

export type FaultSettings = z.infer<typeof faultSettingsSchema>;
