/* A JSON Schema checker for the editor's side panel: the subset of draft 2020-12 the node and
 * settings schemas use (type, enum, required, properties, additionalProperties, items, minLength,
 * maxLength, minimum, maximum, exclusiveMinimum, exclusiveMaximum, maxItems, uniqueItems, oneOf,
 * anyOf). Errors have Ajv's shape and wording ({instancePath, keyword, params, message}).
 *
 * It replaces Ajv because Ajv compiles schemas into code with `new Function`, which the
 * Content-Security-Policy (no 'unsafe-eval') forbids. The server's jsonschema validator stays the
 * authority: a keyword not known here is simply not checked in the browser.
 */
function typeOf(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

function hasType(value, type) {
  const actual = typeOf(value);
  return actual === type || (type === "number" && actual === "integer");
}

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

function check(schema, value, path, errors) {
  if (!schema || typeof schema !== "object") return;
  const err = (keyword, params, message) => errors.push({ instancePath: path, keyword, params, message });
  if (schema.type !== undefined) {
    const types = [].concat(schema.type);
    if (!types.some((t) => hasType(value, t))) {
      err("type", { type: schema.type }, "must be " + types.join(","));
      return;
    }
  }
  if (schema.enum && !schema.enum.some((option) => same(option, value))) {
    err("enum", { allowedValues: schema.enum }, "must be equal to one of the allowed values");
  }
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) {
      err("minimum", { comparison: ">=", limit: schema.minimum }, "must be >= " + schema.minimum);
    }
    if (schema.maximum !== undefined && value > schema.maximum) {
      err("maximum", { comparison: "<=", limit: schema.maximum }, "must be <= " + schema.maximum);
    }
    if (schema.exclusiveMinimum !== undefined && value <= schema.exclusiveMinimum) {
      err("exclusiveMinimum", { comparison: ">", limit: schema.exclusiveMinimum }, "must be > " + schema.exclusiveMinimum);
    }
    if (schema.exclusiveMaximum !== undefined && value >= schema.exclusiveMaximum) {
      err("exclusiveMaximum", { comparison: "<", limit: schema.exclusiveMaximum }, "must be < " + schema.exclusiveMaximum);
    }
  }
  if (typeof value === "string") {
    const length = Array.from(value).length;
    if (schema.minLength !== undefined && length < schema.minLength) {
      err("minLength", { limit: schema.minLength }, "must NOT have fewer than " + schema.minLength + " characters");
    }
    if (schema.maxLength !== undefined && length > schema.maxLength) {
      err("maxLength", { limit: schema.maxLength }, "must NOT have more than " + schema.maxLength + " characters");
    }
  }
  if (Array.isArray(value)) {
    if (schema.maxItems !== undefined && value.length > schema.maxItems) {
      err("maxItems", { limit: schema.maxItems }, "must NOT have more than " + schema.maxItems + " items");
    }
    if (schema.uniqueItems) {
      for (let i = 1; i < value.length; i++) {
        const j = value.slice(0, i).findIndex((other) => same(other, value[i]));
        if (j >= 0) {
          err("uniqueItems", { i, j }, "must NOT have duplicate items (items ## " + j + " and " + i + " are identical)");
          break;
        }
      }
    }
    if (schema.items && typeof schema.items === "object") {
      value.forEach((item, i) => check(schema.items, item, path + "/" + i, errors));
    }
  }
  if (typeOf(value) === "object") {
    (schema.required || []).forEach((name) => {
      if (!Object.prototype.hasOwnProperty.call(value, name)) {
        err("required", { missingProperty: name }, "must have required property '" + name + "'");
      }
    });
    const properties = schema.properties || {};
    Object.keys(value).forEach((name) => {
      if (Object.prototype.hasOwnProperty.call(properties, name)) {
        check(properties[name], value[name], path + "/" + name, errors);
      } else if (schema.additionalProperties === false) {
        err("additionalProperties", { additionalProperty: name }, "must NOT have additional properties");
      } else if (schema.additionalProperties && typeof schema.additionalProperties === "object") {
        check(schema.additionalProperties, value[name], path + "/" + name, errors);
      }
    });
  }
  ["oneOf", "anyOf"].forEach((keyword) => {
    if (!Array.isArray(schema[keyword])) return;
    const passing = schema[keyword].filter((option) => {
      const sub = [];
      check(option, value, path, sub);
      return sub.length === 0;
    }).length;
    if (keyword === "oneOf" && passing !== 1) {
      err("oneOf", { passingSchemas: passing }, "must match exactly one schema in oneOf");
    } else if (keyword === "anyOf" && passing === 0) {
      err("anyOf", {}, "must match a schema in anyOf");
    }
  });
}

/** compile(schema) -> validate(value) -> boolean, with validate.errors like Ajv's. */
export function compile(schema) {
  const validate = function (value) {
    const errors = [];
    check(schema, value, "", errors);
    validate.errors = errors.length ? errors : null;
    return errors.length === 0;
  };
  return validate;
}
