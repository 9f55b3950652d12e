// The expansion of the fixture beside this file, pretty-printed; regenerate with
// `RATELIMIT_BLESS=1 cargo test -p ratelimit-macros snapshots` and review the diff.

async fn search(user: &str) -> Result<String, AppError> {
    let d = {
        fn __ratelimit() {}
        ::ratelimit_runtime::__private::inventory::submit! {
            ::ratelimit_runtime::__private::Declaration { name :
            ::core::option::Option::None, function : { fn __ratelimit_scope() -> &
            'static ::core::primitive::str {
            ::ratelimit_runtime::__private::scope_from_item_path(::ratelimit_runtime::__private::type_name_of(&
            __ratelimit),) } __ratelimit_scope }, position :
            ::core::option::Option::Some(1), rate : ::core::option::Option::Some(const {
            ::ratelimit_runtime::Rate::new_const(5,
            ::ratelimit_runtime::__private::Duration::from_micros(1000000),) }), cost :
            ::core::option::Option::Some(1), file : ::core::file!(), line :
            ::core::line!(), }
        }
        ::ratelimit_runtime::__private::inventory::submit! {
            ::ratelimit_runtime::__private::Declaration { name :
            ::core::option::Option::None, function : { fn __ratelimit_scope() -> &
            'static ::core::primitive::str {
            ::ratelimit_runtime::__private::scope_from_item_path(::ratelimit_runtime::__private::type_name_of(&
            __ratelimit),) } __ratelimit_scope }, position :
            ::core::option::Option::Some(2), rate : ::core::option::Option::Some(const {
            ::ratelimit_runtime::Rate::new_const(1000,
            ::ratelimit_runtime::__private::Duration::from_micros(86400000000),) }), cost
            : ::core::option::Option::Some(1), file : ::core::file!(), line :
            ::core::line!(), }
        }
        let __ratelimit: &'static ::core::primitive::str = {
            static __RATELIMIT_SCOPE: ::ratelimit_runtime::__private::Scope = ::ratelimit_runtime::__private::Scope::new();
            __RATELIMIT_SCOPE.of(&__ratelimit)
        };
        let mut __ratelimit = ::ratelimit_runtime::__private::Stack::new(
            __ratelimit,
            ::ratelimit_runtime::__private::Layout::Stacked,
            2,
        );
        __ratelimit
            .keyed(
                ::ratelimit_runtime::__private::LimitSpec {
                    name: ::core::option::Option::None,
                    position: ::core::option::Option::Some({
                        static __RATELIMIT_POSITION: ::ratelimit_runtime::__private::Position = ::ratelimit_runtime::__private::Position::new(
                            1,
                        );
                        &__RATELIMIT_POSITION
                    }),
                    rate: const {
                        ::ratelimit_runtime::Rate::new_const(
                            5,
                            ::ratelimit_runtime::__private::Duration::from_micros(
                                1000000,
                            ),
                        )
                    },
                    rate_chosen_per_call: false,
                    cost: 1,
                    label: ::core::option::Option::Some("burst"),
                    shadow: false,
                    index: 0,
                },
                &(user),
            );
        __ratelimit
            .keyed(
                ::ratelimit_runtime::__private::LimitSpec {
                    name: ::core::option::Option::None,
                    position: ::core::option::Option::Some({
                        static __RATELIMIT_POSITION: ::ratelimit_runtime::__private::Position = ::ratelimit_runtime::__private::Position::new(
                            2,
                        );
                        &__RATELIMIT_POSITION
                    }),
                    rate: const {
                        ::ratelimit_runtime::Rate::new_const(
                            1000,
                            ::ratelimit_runtime::__private::Duration::from_micros(
                                86400000000,
                            ),
                        )
                    },
                    rate_chosen_per_call: false,
                    cost: 1,
                    label: ::core::option::Option::None,
                    shadow: false,
                    index: 1,
                },
                &(user),
            );
        match ::ratelimit_runtime::__private::check_stack(
                ::ratelimit_runtime::__private::global(),
                __ratelimit,
            )
            .await
        {
            ::core::result::Result::Ok(__ratelimit) => __ratelimit,
            ::core::result::Result::Err(__ratelimit) => {
                return ::ratelimit_runtime::__private::denied(__ratelimit);
            }
        }
    };
    let d: &::ratelimit_runtime::Decisions = &d;
    { Ok(d.headers().policy()) }
}
