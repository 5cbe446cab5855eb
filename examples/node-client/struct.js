// google.protobuf.Struct to and from plain JavaScript objects, for @grpc/proto-loader.
//
// The loader (protobufjs) has no JSON mapping for Struct: a plain object given for a
// Struct field (ToolDefinition.parameters, Record.metadata) is sent as an empty Struct
// without an error, and a Struct reads back in its wire form,
// {fields: {key: {stringValue: "..."}}}. The Value fields are camelCase (stringValue,
// structValue, ...) even with `keepCase: true`: the loader's copy of struct.proto has
// them so, and a snake_case key (string_value) is dropped as silently.

/**
 * A JSON value as a google.protobuf.Value.
 * @param {unknown} value null, a boolean, a finite number, a string, an array or a plain object
 * @returns {object}
 */
export function toValue(value) {
  if (value === null) return { nullValue: "NULL_VALUE" };
  if (typeof value === "boolean") return { boolValue: value };
  if (typeof value === "number" && Number.isFinite(value)) return { numberValue: value };
  if (typeof value === "string") return { stringValue: value };
  if (Array.isArray(value)) return { listValue: { values: value.map(toValue) } };
  if (typeof value === "object") return { structValue: toStruct(/** @type {object} */ (value)) };
  throw new TypeError(`not a JSON value: ${String(value)}`);
}

/**
 * A plain object as a google.protobuf.Struct, e.g. a tool's JSON schema for
 * ToolDefinition.parameters.
 * @param {object} object
 * @returns {{fields: Record<string, object>}}
 */
export function toStruct(object) {
  return {
    fields: Object.fromEntries(Object.entries(object).map(([key, value]) => [key, toValue(value)])),
  };
}

/**
 * A google.protobuf.Value as read by the loader, as a JSON value.
 * @param {any} value
 * @returns {unknown}
 */
export function fromValue(value) {
  if (value == null) return null;
  if (value.structValue != null) return fromStruct(value.structValue);
  if (value.listValue != null) return (value.listValue.values ?? []).map(fromValue);
  if (value.stringValue != null) return value.stringValue;
  if (value.numberValue != null) return value.numberValue;
  if (value.boolValue != null) return value.boolValue;
  return null;
}

/**
 * A google.protobuf.Struct as read by the loader (Record.metadata), as a plain object;
 * an unset Struct gives {}.
 * @param {any} struct
 * @returns {Record<string, unknown>}
 */
export function fromStruct(struct) {
  return Object.fromEntries(
    Object.entries(struct?.fields ?? {}).map(([key, value]) => [key, fromValue(value)]),
  );
}
