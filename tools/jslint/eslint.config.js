// eslint's flat config for the web console's scripts (stello_console/static/*.js: plain ES
// modules the browser loads as they are, no build step). scripts/lint_js runs it from the
// repository's root: `eslint --config tools/jslint/eslint.config.js stello_console/static`.
import js from "@eslint/js";
import globals from "globals";

export default [
  js.configs.recommended,
  {
    files: ["stello_console/static/**/*.js"],
    languageOptions: {
      ecmaVersion: 2024,
      sourceType: "module",
      globals: { ...globals.browser },
    },
    linterOptions: { reportUnusedDisableDirectives: "error" },
    rules: {
      // Beside the recommended set (no-undef, no-unused-vars, ...): rules that catch bugs.
      "array-callback-return": "error",
      "consistent-return": "error",
      eqeqeq: ["error", "always"],
      "no-constructor-return": "error",
      "no-promise-executor-return": "error",
      "no-self-compare": "error",
      "no-shadow": ["error", { builtinGlobals: false }],
      "no-template-curly-in-string": "error",
      "no-unmodified-loop-condition": "error",
      "no-unreachable-loop": "error",
      "no-unused-vars": ["error", { args: "after-used", caughtErrors: "all" }],
      "no-use-before-define": ["error", { functions: false, classes: true, variables: true }],
      "no-var": "error",
      "prefer-const": "error",
      "require-await": "error",
    },
  },
];
