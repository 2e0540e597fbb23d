//! Unit tests of `bulk.rs`.

use serde_json::json;

use super::*;

fn parse(v: Value) -> Result<BulkRequest, String> {
    BulkRequest::parse(&v)
}

#[test]
fn counts_are_int64s_as_strings_or_numbers() {
    let r = parse(json!({"count": "3", "minCount": 2, "namePattern": "vm-##",
                         "instanceProperties": {"machineType": "e2-small"}}))
    .unwrap();
    assert_eq!((r.count, r.min_count), (3, 2));
    assert_eq!(r.names, Names::Pattern { prefix: "vm-".into(), width: 2, suffix: String::new() });
    let r = parse(json!({"count": 2, "namePattern": "a-#-b", "instanceProperties": {}})).unwrap();
    assert_eq!(r.min_count, 2, "minCount defaults to count");
    assert_eq!(Names::numbered("a-", 3, "-b", 7), "a-007-b");
}

#[test]
fn bad_bodies_are_refused_with_the_field_named() {
    let props = json!({"machineType": "e2-small"});
    let cases = [
        (json!({"count": "0", "namePattern": "v-#", "instanceProperties": props}), "count"),
        (json!({"count": 5001, "namePattern": "v-####", "instanceProperties": props}), "count"),
        (json!({"count": "x", "namePattern": "v-#", "instanceProperties": props}), "count"),
        (json!({"count": 2, "minCount": 3, "namePattern": "v-#", "instanceProperties": props}), "minCount"),
        (json!({"count": 1, "instanceProperties": props}), "namePattern or perInstanceProperties"),
        (
            json!({"count": 1, "namePattern": "v-#", "perInstanceProperties": {"a": {}}, "instanceProperties": props}),
            "not both",
        ),
        (json!({"count": 1, "namePattern": "v-#-#", "instanceProperties": props}), "namePattern"),
        (json!({"count": 10, "namePattern": "v-#", "instanceProperties": props}), "fewer names"),
        (json!({"count": 1, "namePattern": "V-#", "instanceProperties": props}), "namePattern"),
        (
            json!({"count": 2, "perInstanceProperties": {"a": {}}, "instanceProperties": props}),
            "must not exceed",
        ),
        (
            json!({"count": 1, "perInstanceProperties": {"A": {}}, "instanceProperties": props}),
            "perInstanceProperties",
        ),
        (json!({"count": 1, "namePattern": "v-#"}), "instanceProperties"),
        (
            json!({"count": 1, "namePattern": "v-#", "sourceInstanceTemplate": "regions/r/instanceTemplates/t"}),
            "sourceInstanceTemplate",
        ),
        (
            json!({"count": 1, "namePattern": "v-#", "instanceProperties": props,
                "locationPolicy": {"targetShape": "SOMEWHERE"}}),
            "targetShape",
        ),
        (
            json!({"count": 1, "namePattern": "v-#", "instanceProperties": props,
                "locationPolicy": {"locations": {"zones/us-central1-a": {"preference": "MAYBE"}}}}),
            "preference",
        ),
        (
            json!({"count": 1, "namePattern": "v-#", "instanceProperties": props,
                "instanceFlexibilityPolicy": {"instanceSelections": {"a": {"machineTypes": []}}}}),
            "machineTypes",
        ),
    ];
    for (body, want) in cases {
        let e = parse(body.clone()).unwrap_err();
        assert!(e.contains(want), "{body}: {e}");
    }
}

#[test]
fn listed_names_policy_and_ranked_choices_are_read() {
    let r = parse(json!({
        "count": "2", "perInstanceProperties": {"vm-b": {"hostname": "b.example.com"}, "vm-a": {}, "vm-c": {}},
        "sourceInstanceTemplate": "https://www.googleapis.com/compute/v1/projects/p/global/instanceTemplates/t1",
        "locationPolicy": {"targetShape": "BALANCED", "zones": [{"zone": "zones/us-central1-a"}],
                           "locations": {"zones/us-central1-b": {"preference": "DENY"},
                                         "zones/us-central1-c": {"preference": "ALLOW", "constraints": {"maxCount": "4"}}}},
        "instanceFlexibilityPolicy": {"instanceSelections": {
            "second": {"machineTypes": ["n2d-standard-8", "c3-standard-8"], "rank": "2"},
            "first": {"machineTypes": ["n2-standard-8"], "rank": 1}}},
    }))
    .unwrap();
    assert_eq!(
        r.names,
        Names::Listed(vec![("vm-a".into(), None), ("vm-b".into(), Some("b.example.com".into()))]),
        "the first count names, in name order"
    );
    assert_eq!(r.template.as_deref(), Some("t1"));
    assert_eq!(r.properties, json!({}));
    assert_eq!(r.policy.shape, Shape::Balanced);
    assert_eq!(r.policy.zones, Some(vec!["us-central1-a".to_owned()]));
    assert!(r.policy.deny.contains("us-central1-b") && r.policy.allow.contains("us-central1-c"));
    assert_eq!(r.policy.max_count.get("us-central1-c"), Some(&4));
    let order: Vec<(i64, &str)> = r.choices.iter().map(|c| (c.rank, c.machine_type.as_str())).collect();
    assert_eq!(order, [(1, "n2-standard-8"), (2, "n2d-standard-8"), (2, "c3-standard-8")]);
}
