// typescript-eslint with its type-checked rules over every TypeScript file (`npm run lint`, and first
// in `npm test`). Type information comes from tsconfig.json through the project service.
import eslint from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "node_modules/", ".gpuhost/", "**/*.mjs", "**/*.js"] },
  eslint.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    linterOptions: { reportUnusedDisableDirectives: "error" },
    rules: {
      // Dynamic-provider methods, resource hooks and test fakes are async by contract (the SDK and
      // the gate await what they return), whether or not a given one awaits anything itself.
      "@typescript-eslint/require-await": "off",
      // A leading underscore marks a parameter an interface requires and this implementation ignores.
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
    },
  },
);
